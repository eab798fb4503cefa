package v1alpha1

import (
	"fmt"
	"strings"
)

// Via says, for people, how a reply a GitOps engine applied came: "via Git,
// commit 9b1d6c0 (verified), applied by Kustomization team-a/answers". The
// commit is the revision's SHA, shortened; a revision in another form is
// shown whole.
func (s *ReplySource) Via() string {
	commit := s.Revision
	if i := strings.LastIndex(commit, ":"); i >= 0 { // Flux: "main@sha1:<sha>"
		commit = commit[i+1:]
	}
	if len(commit) >= 40 && strings.Trim(commit, "0123456789abcdef") == "" {
		commit = commit[:7]
	}
	out := "via Git"
	if commit != "" {
		out += ", commit " + commit
		if s.Verified {
			out += " (verified)"
		}
	}
	return out + fmt.Sprintf(", applied by %s %s/%s", s.Engine.Kind, s.Engine.Namespace, s.Engine.Name)
}
