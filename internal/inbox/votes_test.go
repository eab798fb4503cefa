package inbox

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/test/testenv"
)

// governedStatus is the status of an Open question that needs two
// approvals, one from the set prod/sre, with one approving vote.
func governedStatus(q *hitlv1.UserQuestion, vote hitlv1.Vote) hitlv1.UserQuestionStatus {
	return hitlv1.UserQuestionStatus{State: hitlv1.StateOpen, SpecDigest: hitlv1.SpecDigest(&q.Spec),
		Votes: []hitlv1.Vote{vote}, Tally: "1/2",
		Approval: &hitlv1.EffectiveApproval{Approvals: 2, Veto: true, ExcludeRequester: true,
			From: []hitlv1.ApproverSet{{Name: "prod/sre", Groups: []string{"sre"}, Minimum: 1}}}}
}

func approved(user string, sets ...string) hitlv1.Vote {
	return hitlv1.Vote{Reply: "q-" + user, By: hitlv1.UserInfo{Username: user}, Choice: hitlv1.VoteApprove, Sets: sets,
		At: metav1.NewMicroTime(time.Now())}
}

func TestCardsOfAGovernedQuestion(t *testing.T) {
	g := NewWithT(t)
	s, err := New(Options{Auth: &ProxyAuth{Secret: []byte("0123456789abcdef")}, Clients: StaticClient(nil)})
	g.Expect(err).NotTo(HaveOccurred())
	defer s.Close()
	q := approval("")
	q.Status = governedStatus(q, approved("alice"))

	// carol has not voted: the tally, alice's vote, what is missing, and
	// the answer controls.
	carol := s.item(q, Person{Username: "carol"}, nil, time.Now())
	g.Expect(carol.Voted).To(BeFalse())
	g.Expect(carol.Digest).To(Equal(q.Status.SpecDigest))
	g.Expect(carol.Card).To(ContainSubstring(`data-digest="` + q.Status.SpecDigest + `"`))
	g.Expect(carol.Status).To(ContainSubstring("<strong>Votes 1/2</strong>"))
	g.Expect(carol.Status).To(ContainSubstring("settles with 2 approvals; at least 1 from prod/sre; a rejection vetoes; the asker may not vote"))
	g.Expect(carol.Status).To(ContainSubstring(`<li class="vote vote-Approve"><strong>alice</strong> voted Approve</li>`))
	g.Expect(carol.Status).To(ContainSubstring("Still needed: 1 more approval; 1 more from prod/sre (group sre)"))
	g.Expect(carol.Status).NotTo(ContainSubstring("You voted"))
	g.Expect(carol.Card).To(ContainSubstring(`data-action="toggle">Answer</button>`))
	g.Expect(carol.Card).To(ContainSubstring(`data-choice="Allow"`))

	// alice has: her vote, and no way to vote again.
	alice := s.item(q, Person{Username: "alice"}, nil, time.Now())
	g.Expect(alice.Voted).To(BeTrue())
	g.Expect(alice.Status).To(ContainSubstring(`<strong>alice</strong> (you) voted Approve`))
	g.Expect(alice.Status).To(ContainSubstring(`You voted <strong>Approve</strong>`))
	g.Expect(alice.Card).To(ContainSubstring(`data-action="toggle" hidden>Answer</button>`))

	// Settled, it needs nothing more; the vote for a set says so.
	q.Status.State, q.Status.Tally = hitlv1.StateSettled, "2/2"
	q.Status.Votes = append(q.Status.Votes, approved("dave", "prod/sre"))
	q.Status.Settlement = &hitlv1.Settlement{Reply: "q-dave", AnsweredBy: &hitlv1.UserInfo{Username: "dave"}, Votes: q.Status.Votes}
	done := s.item(q, Person{Username: "carol"}, nil, time.Now())
	g.Expect(done.Status).To(ContainSubstring("<strong>Votes 2/2</strong>"))
	g.Expect(done.Status).To(ContainSubstring(`<strong>dave</strong> voted Approve <span class="sets">for prod/sre</span>`))
	g.Expect(done.Status).NotTo(ContainSubstring("Still needed"))

	// A question no rule governs shows no votes.
	plain := s.item(approval(""), Person{Username: "alice"}, nil, time.Now())
	g.Expect(plain.Status).NotTo(ContainSubstring("Votes"))
	g.Expect(plain.Voted).To(BeFalse())

	// A voter's name is the API server's, yet escaped like any text.
	evil := `"><script>alert(1)</script>`
	q.Status.Votes = []hitlv1.Vote{approved(evil, evil)}
	it := s.item(q, Person{Username: evil}, nil, time.Now())
	g.Expect(it.Status).NotTo(ContainSubstring(evil))
	g.Expect(it.Status).NotTo(ContainSubstring("<script"))
	g.Expect(it.Voted).To(BeTrue())
}

// post sends a page's POST as person, through the proxy, and returns the
// status and the decoded answer.
func (e *streamEnv) post(person, path string, body any) (int, map[string]any) {
	e.t.Helper()
	data, err := json.Marshal(body)
	e.g.Expect(err).NotTo(HaveOccurred())
	req, err := http.NewRequestWithContext(e.ctx, http.MethodPost, e.url+path, bytes.NewReader(data))
	e.g.Expect(err).NotTo(HaveOccurred())
	req.Header.Set("X-Hitl-Proxy-Secret", streamSecret)
	req.Header.Set("X-Forwarded-User", person)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(csrfHeader, e.srv.csrfToken(Person{Username: person}))
	res, err := http.DefaultClient.Do(req)
	e.g.Expect(err).NotTo(HaveOccurred())
	defer res.Body.Close()
	out := map[string]any{}
	_ = json.NewDecoder(res.Body).Decode(&out)
	return res.StatusCode, out
}

// TestARepliedVoteIsBoundToTheCardAndCastOnce sends replies through the
// inbox to a governed question (there is no controller here: the test
// writes the status it would): the reply carries the digest of the
// question the card showed, a reply for a question changed since creates
// nothing (QUESTION_CHANGED), and once the person's vote is counted, the
// stream says so and a second vote creates nothing (DUPLICATE_VOTE).
func TestARepliedVoteIsBoundToTheCardAndCastOnce(t *testing.T) {
	e := newStreamEnv(t, 8, "alice")
	e.srv.opts.ReplyTimeout = time.Second // no controller decides
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "replier", Namespace: e.ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{hitlv1.GroupVersion.Group}, Resources: []string{"questionreplies"},
			Verbs: []string{"create", "get", "list", "watch"}}}}
	e.g.Expect(e.admin.Create(e.ctx, role)).To(Succeed())
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "alice-replier", Namespace: e.ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "replier"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "alice"}}}
	e.g.Expect(e.admin.Create(e.ctx, binding)).To(Succeed())
	e.g.Expect(testenv.AwaitBinding(e.ctx, e.admin, e.ns, binding.RoleRef, binding.Subjects, testenv.GrantWait)).To(Succeed())

	e.ask("q", "bot")
	q := &hitlv1.UserQuestion{}
	e.g.Expect(e.admin.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: "q"}, q)).To(Succeed())
	q.Status = governedStatus(q, approved("bob"))
	e.g.Expect(e.admin.Status().Update(e.ctx, q)).To(Succeed())
	digest := q.Status.SpecDigest

	s := e.open("alice", "")
	reset := e.next(s)
	e.g.Expect(reset.Type).To(Equal("reset"))
	e.g.Expect(reset.Items).To(HaveLen(1))
	e.g.Expect(reset.Items[0].Digest).To(Equal(digest))
	e.g.Expect(reset.Items[0].Voted).To(BeFalse())
	e.g.Expect(reset.Items[0].Status).To(ContainSubstring("Votes 1/2"))

	replies := func() []hitlv1.QuestionReply {
		l := &hitlv1.QuestionReplyList{}
		e.g.Expect(e.admin.List(e.ctx, l, client.InNamespace(e.ns))).To(Succeed())
		return l.Items
	}
	answers := []hitlv1.AnswerItem{{ID: "env", Selected: []string{"staging"}}}
	status, body := e.post("alice", "/api/reply", replyRequest{target: target{Namespace: e.ns, Name: "q", UID: q.UID},
		SpecDigest: "sha256:" + strings.Repeat("0", 64), Answers: answers})
	e.g.Expect(status).To(Equal(http.StatusConflict), "%v", body)
	e.g.Expect(body).To(HaveKeyWithValue("code", string(hitlv1.CodeQuestionChanged)))
	e.g.Expect(body["explanation"]).To(ContainSubstring("The question changed since this card was shown"))
	e.g.Expect(replies()).To(BeEmpty(), "a reply for a question changed since creates nothing")

	status, body = e.post("alice", "/api/reply", replyRequest{target: target{Namespace: e.ns, Name: "q", UID: q.UID},
		SpecDigest: digest, Answers: answers})
	e.g.Expect(status).To(Equal(http.StatusAccepted), "sent; no controller decides: %v", body)
	e.g.Expect(replies()).To(HaveLen(1))
	r := replies()[0]
	e.g.Expect(r.Spec.QuestionRef.SpecDigest).To(Equal(digest), "the reply carries the digest of the question the card showed")
	e.g.Expect(r.Spec.QuestionRef.UID).To(Equal(q.UID))

	// The controller counts alice's vote: her card says so, and offers no other.
	e.g.Expect(e.admin.Get(e.ctx, client.ObjectKeyFromObject(q), q)).To(Succeed())
	q.Status.Votes = append(q.Status.Votes, approved("alice"))
	q.Status.Tally = "2/2"
	e.g.Expect(e.admin.Status().Update(e.ctx, q)).To(Succeed())
	var voted message
	e.g.Eventually(func() bool {
		voted = e.next(s)
		return voted.Type == "upsert" && voted.Item.Voted
	}).Should(BeTrue())
	e.g.Expect(voted.Item.Status).To(ContainSubstring("You voted <strong>Approve</strong>"))

	status, body = e.post("alice", "/api/reply", replyRequest{target: target{Namespace: e.ns, Name: "q", UID: q.UID},
		SpecDigest: digest, Answers: answers})
	e.g.Expect(status).To(Equal(http.StatusConflict), "%v", body)
	e.g.Expect(body).To(HaveKeyWithValue("code", string(hitlv1.CodeDuplicateVote)))
	e.g.Expect(body["message"]).To(HavePrefix("DUPLICATE_VOTE: alice has already voted Approve on question q"))
	e.g.Expect(replies()).To(HaveLen(1), "a second vote creates nothing")
}
