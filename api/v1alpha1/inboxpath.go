package v1alpha1

import "net/url"

// InboxQuestionPrefix starts the web inbox's path of a question's card,
// InboxQuestionPath.
const InboxQuestionPrefix = "/q/"

// InboxQuestionPath is the path, under the web inbox's URL, that opens the
// card of question namespace/name: /q/<namespace>/<name>, each segment
// path-escaped. It is the one home of the deep link: every notification
// links to it (internal/notify/channel) and the web inbox serves it
// (internal/inbox), so the two cannot drift apart.
func InboxQuestionPath(namespace, name string) string {
	return InboxQuestionPrefix + url.PathEscape(namespace) + "/" + url.PathEscape(name)
}
