package userquestion

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// apBuilder builds an ApprovalPolicy of the question's namespace, at
// generation 1, whose empty selector governs every question:
//
//	aPolicy("prod-gate", 2).from("sre", 1, "sre").veto(false)
type apBuilder struct{ p hitlv1.ApprovalPolicy }

func aPolicy(name string, approvals int32) *apBuilder {
	return &apBuilder{p: hitlv1.ApprovalPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: name, Generation: 1},
		Spec:       hitlv1.ApprovalPolicySpec{Rule: hitlv1.ApprovalRule{Approvals: approvals}},
	}}
}

func (b *apBuilder) generation(g int64) *apBuilder { b.p.Generation = g; return b }

// from adds a set of approvers by group to the rule.
func (b *apBuilder) from(set string, minimum int32, groups ...string) *apBuilder {
	b.p.Spec.Rule.From = append(b.p.Spec.Rule.From, hitlv1.ApproverSet{Name: set, Groups: groups, Minimum: minimum})
	return b
}

// fromUsers adds a set of approvers by username to the rule.
func (b *apBuilder) fromUsers(set string, minimum int32, users ...string) *apBuilder {
	b.p.Spec.Rule.From = append(b.p.Spec.Rule.From, hitlv1.ApproverSet{Name: set, Users: users, Minimum: minimum})
	return b
}

func (b *apBuilder) veto(v bool) *apBuilder { b.p.Spec.Rule.Veto = &v; return b }

func (b *apBuilder) excludeRequester(v bool) *apBuilder {
	b.p.Spec.Rule.ExcludeRequester = &v
	return b
}

func (b *apBuilder) agents(agents ...string) *apBuilder { b.p.Spec.Selector.Agents = agents; return b }

func (b *apBuilder) intents(intents ...hitlv1.IntentType) *apBuilder {
	b.p.Spec.Selector.Intents = intents
	return b
}

func (b *apBuilder) selecting(sel *metav1.LabelSelector) *apBuilder {
	b.p.Spec.Selector.QuestionSelector = sel
	return b
}

func (b *apBuilder) obj() hitlv1.ApprovalPolicy { return *b.p.DeepCopy() }

// requires gives the ask the agent's own approval rule, spec.approval.
func (b *uqBuilder) requires(r hitlv1.ApprovalRule) *uqBuilder { b.q.Spec.Approval = &r; return b }

// always gives the last question's Approval intent an "always" option.
func (b *uqBuilder) always(label string) *uqBuilder {
	b.last().Options = append(b.last().Options, hitlv1.QuestionOption{Label: label})
	b.last().Intent.Approval.Always = label
	return b
}

// digest sets spec.questionRef.specDigest: the question the reply was
// prepared for.
func (b *qrBuilder) digest(d string) *qrBuilder { b.r.Spec.QuestionRef.SpecDigest = d; return b }

// custom answers a question with free text.
func (b *qrBuilder) custom(id, text string) *qrBuilder {
	b.r.Spec.Answers = append(b.r.Spec.Answers, hitlv1.AnswerItem{ID: id, Custom: text})
	return b
}

// reconciledUnder is reconciled with the policies Reconcile reads for a
// question's first look: the ones that govern it.
func (s *scene) reconciledUnder(policies ...hitlv1.ApprovalPolicy) *scene {
	in := s.inputs()
	in.Policies = policies
	s.question, s.replies = written(in, Decide(in), true)
	return s
}

// voteWant is a decideWant on a question that may be governed: every field
// is checked, a zero value meaning "none" (no rule: an ungoverned question).
type voteWant struct {
	decideWant
	approval *hitlv1.EffectiveApproval
	votes    []hitlv1.Vote
	tally    string
}

func (w voteWant) check(t *testing.T, in Inputs, got Decision) {
	t.Helper()
	w.decideWant.check(t, in, got)
	st := got.Status
	if !equality.Semantic.DeepEqual(st.Approval, w.approval) {
		t.Errorf("approval = %s, want %s", dump(st.Approval), dump(w.approval))
	}
	if !equality.Semantic.DeepEqual(st.Votes, w.votes) {
		t.Errorf("votes = %s, want %s", dump(st.Votes), dump(w.votes))
	}
	if st.Tally != w.tally {
		t.Errorf("tally = %q, want %q", st.Tally, w.tally)
	}
	if want := hitlv1.SpecDigest(&in.Question.Spec); st.SpecDigest != want {
		t.Errorf("specDigest = %q, want %q", st.SpecDigest, want)
	}
	if len(st.Votes) > hitlv1.MaxVotes {
		t.Errorf("%d votes recorded, more than the %d status.votes holds", len(st.Votes), hitlv1.MaxVotes)
	}
}

// decideUnder decides on the scene with the policies, and checks what every
// decision must: its inputs untouched, the expected decision, and that
// deciding again on what it wrote changes nothing.
func decideUnder(t *testing.T, s *scene, policies []hitlv1.ApprovalPolicy, w voteWant) {
	t.Helper()
	in, pristine := s.inputs(), s.inputs()
	for _, p := range policies {
		in.Policies = append(in.Policies, *p.DeepCopy())
		pristine.Policies = append(pristine.Policies, *p.DeepCopy())
	}
	got := Decide(in)
	if !equality.Semantic.DeepEqual(in.Question, pristine.Question) || !equality.Semantic.DeepEqual(in.Replies, pristine.Replies) ||
		!equality.Semantic.DeepEqual(in.Policies, pristine.Policies) {
		t.Errorf("Decide changed its inputs:\n got %s\nwant %s", dump(in), dump(pristine))
	}
	w.check(t, in, got)
	if w.unchanged && !equality.Semantic.DeepEqual(got.Status, in.Question.Status) {
		t.Errorf("status changed:\n got %s\nwant %s", dump(got.Status), dump(in.Question.Status))
	}
	checkSettlesOnce(t, in, got)
}

// The identities of the scenarios. The agent asks; alice (aReply's
// default author), bob, carol and dave answer; frank and gina are in the
// group sre.
var (
	agentUser = &hitlv1.UserInfo{Username: "system:serviceaccount:agents:coder", UID: "uid-coder"}
	bobUser   = &hitlv1.UserInfo{Username: "bob"}
	carolUser = &hitlv1.UserInfo{Username: "carol"}
	daveUser  = &hitlv1.UserInfo{Username: "dave"}
	frankUser = &hitlv1.UserInfo{Username: "frank", Groups: []string{"system:authenticated", "sre"}}
)

// aVote is the vote status.votes holds for reply, counted at at: its
// author by username and UID, without groups.
func aVote(reply string, by *hitlv1.UserInfo, choice hitlv1.VoteChoice, at time.Time, sets ...string) hitlv1.Vote {
	return hitlv1.Vote{Reply: reply, ReplyUID: replyUID(reply), By: hitlv1.UserInfo{Username: by.Username, UID: by.UID}, Choice: choice, Sets: sets, At: metav1.NewMicroTime(at)}
}

func TestVotes(t *testing.T) {
	const s = time.Second
	red := []hitlv1.AnswerItem{{ID: "color", Selected: []string{"red"}}}
	green := []hitlv1.AnswerItem{{ID: "color", Selected: []string{"green"}}}
	approve, reject := hitlv1.VoteApprove, hitlv1.VoteReject

	settledWith := func(reply string, by *hitlv1.UserInfo, late bool, at time.Time, votes ...hitlv1.Vote) *hitlv1.Settlement {
		return &hitlv1.Settlement{Reply: reply, ReplyUID: replyUID(reply), AnsweredBy: by, Late: late, At: metav1.NewMicroTime(at), Votes: votes}
	}
	queued := func(reply string, answers []hitlv1.AnswerItem, by *hitlv1.UserInfo, at time.Time) *hitlv1.QueuedReply {
		return &hitlv1.QueuedReply{Name: reply, UID: replyUID(reply), Answers: answers, AnsweredBy: by, QueuedAt: metav1.NewMicroTime(at)}
	}
	countedReply := func(reply string) replyWant {
		return replyWant{name: reply, outcome: hitlv1.OutcomeCounted, says: []string{"question " + askName, "status.votes"}}
	}
	// recounted is the Counted outcome of a vote the status read already
	// records: no status decides it, so it needs no fence.
	recounted := func(reply string) replyWant {
		w := countedReply(reply)
		w.alone = true
		return w
	}
	applied := func(reply string) replyWant {
		return replyWant{name: reply, outcome: hitlv1.OutcomeApplied, says: []string{"question " + askName}}
	}
	queuedOutcome := func(reply string) replyWant {
		return replyWant{name: reply, outcome: hitlv1.OutcomeQueued, says: []string{"question " + askName}}
	}
	admitted := func(reply string) replyWant {
		return replyWant{name: reply, outcome: hitlv1.OutcomeAdmitted, says: []string{"question " + askName}}
	}
	rejected := func(reply string, code hitlv1.ErrorCode, says ...string) replyWant {
		return replyWant{name: reply, outcome: hitlv1.OutcomeRejected, reason: code, says: says}
	}
	refused := func(reply string, code hitlv1.ErrorCode, says ...string) replyWant {
		return replyWant{name: reply, outcome: hitlv1.OutcomeRejected, reason: code, says: says, alone: true}
	}

	// The policies, and the rules they fix into status.approval.
	two := aPolicy("two-approvers", 2).obj()
	twoRule := &hitlv1.EffectiveApproval{Approvals: 2, Veto: true, ExcludeRequester: true,
		Policies: []hitlv1.PolicyReference{{Name: "two-approvers", Generation: 1}}}
	one := aPolicy("one-approver", 1).obj()
	oneRule := &hitlv1.EffectiveApproval{Approvals: 1, Veto: true, ExcludeRequester: true,
		Policies: []hitlv1.PolicyReference{{Name: "one-approver", Generation: 1}}}
	noVeto := aPolicy("two-noes", 2).veto(false).obj()
	noVetoRule := &hitlv1.EffectiveApproval{Approvals: 2, ExcludeRequester: true,
		Policies: []hitlv1.PolicyReference{{Name: "two-noes", Generation: 1}}}
	gate := aPolicy("prod-gate", 2).from("sre", 1, "sre").obj()
	gateRule := &hitlv1.EffectiveApproval{Approvals: 2, Veto: true, ExcludeRequester: true,
		From:     []hitlv1.ApproverSet{{Name: "prod-gate/sre", Groups: []string{"sre"}, Minimum: 1}},
		Policies: []hitlv1.PolicyReference{{Name: "prod-gate", Generation: 1}}}
	leads := aPolicy("prod-gate", 2).fromUsers("leads", 1, "dave").obj()
	leadsRule := &hitlv1.EffectiveApproval{Approvals: 2, Veto: true, ExcludeRequester: true,
		From:     []hitlv1.ApproverSet{{Name: "prod-gate/leads", Users: []string{"dave"}, Minimum: 1}},
		Policies: []hitlv1.PolicyReference{{Name: "prod-gate", Generation: 1}}}
	mayAnswerOwn := aPolicy("self-service", 2).excludeRequester(false).obj()
	mayAnswerOwnRule := &hitlv1.EffectiveApproval{Approvals: 2, Veto: true,
		Policies: []hitlv1.PolicyReference{{Name: "self-service", Generation: 1}}}

	// approvalQ is an Approval question (red approves, green rejects) the
	// agent asked; plainQ one without an intent, where each reply approves.
	approvalQ := func() *uqBuilder { return aQuestion().approval("red", "green").askedBy(agentUser) }
	plainQ := func() *uqBuilder { return aQuestion().askedBy(agentUser) }
	// governed is q first looked at, at 1s, under the policies.
	governed := func(q *uqBuilder, policies ...hitlv1.ApprovalPolicy) *scene {
		return given(q).at(secs(1)).reconciledUnder(policies...)
	}
	// bobApproved is approvalQ under two-approvers with bob's approval, r1,
	// counted at 2s.
	bobApproved := func() *scene {
		return governed(approvalQ(), two).plus(aReply("r1").created(secs(2)).selects("color", "red").by("bob")).at(secs(2)).reconciled()
	}
	bobVote := aVote("r1", bobUser, approve, secs(2))

	// timedReview is a PlanReview (red approves the plan) with a 3s
	// window, governed by two-approvers; withBob has bob's approval, r1,
	// counted at 2s; closedWithBob is it after its window closed at 3s
	// one approval short; carolQueued is it with carol's deciding
	// approval, r2, queued at 10s.
	timedReview := func() *scene { return governed(aQuestion().planReview("red").timeout(3*s).askedBy(agentUser), two) }
	withBob := func() *scene {
		return timedReview().plus(aReply("r1").created(secs(2)).selects("color", "red").by("bob")).at(secs(2)).reconciled()
	}
	closedWithBob := func() *scene { return withBob().at(secs(3)).reconciled() }
	carolQueued := func() *scene {
		return closedWithBob().plus(aReply("r2").created(secs(10)).selects("color", "red").by("carol")).at(secs(10)).reconciled()
	}
	carolVote := aVote("r2", carolUser, approve, secs(10))

	// voters is n approving replies, v00 to v<n-1>, by voter-00 to
	// voter-<n-1>, none of them in sre, created at 2s; votersVotes their
	// votes, counted at at.
	voters := func(n int) []*qrBuilder {
		var rs []*qrBuilder
		for i := range n {
			rs = append(rs, aReply(fmt.Sprintf("v%02d", i)).created(secs(2)).selects("color", "red").by(fmt.Sprintf("voter-%02d", i)))
		}
		return rs
	}
	votersVotes := func(n int, at time.Time) []hitlv1.Vote {
		var vs []hitlv1.Vote
		for i := range n {
			vs = append(vs, aVote(fmt.Sprintf("v%02d", i), &hitlv1.UserInfo{Username: fmt.Sprintf("voter-%02d", i)}, approve, at))
		}
		return vs
	}
	votersCounted := func(n int) []replyWant {
		var ws []replyWant
		for i := range n {
			ws = append(ws, countedReply(fmt.Sprintf("v%02d", i)))
		}
		return ws
	}

	zeroDigest := "sha256:" + strings.Repeat("0", 64)

	cases := []struct {
		name     string
		in       *scene
		policies []hitlv1.ApprovalPolicy
		want     voteWant
	}{
		// 1. What governs a question is fixed at its first look.
		{
			name:     "a question a policy governs records the policy's rule at its first look, with an empty tally",
			in:       given(approvalQ()).at(secs(1)),
			policies: []hitlv1.ApprovalPolicy{two},
			want:     voteWant{decideWant: decideWant{state: hitlv1.StateOpen}, approval: twoRule, tally: "0/2"},
		},
		{
			name: "a question without a policy or spec.approval is ungoverned: no rule, no tally",
			in:   given(approvalQ()).at(secs(1)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateOpen}},
		},
		{
			name: "the agent's own spec.approval governs a question no policy governs",
			in:   given(approvalQ().requires(hitlv1.ApprovalRule{Approvals: 3, Veto: ptr.To(false)})).at(secs(1)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateOpen},
				approval: &hitlv1.EffectiveApproval{Approvals: 3, ExcludeRequester: true}, tally: "0/3"},
		},
		{
			name:     "spec.approval and a policy make the strictest rule: the most approvals, and the policy's default veto",
			in:       given(approvalQ().requires(hitlv1.ApprovalRule{Approvals: 3, Veto: ptr.To(false)})).at(secs(1)),
			policies: []hitlv1.ApprovalPolicy{two},
			want: voteWant{decideWant: decideWant{state: hitlv1.StateOpen},
				approval: &hitlv1.EffectiveApproval{Approvals: 3, Veto: true, ExcludeRequester: true, Policies: twoRule.Policies}, tally: "0/3"},
		},
		{
			name:     "once governed, the policies given to a later look change nothing: the rule of two still applies",
			in:       bobApproved().at(secs(3)),
			policies: []hitlv1.ApprovalPolicy{aPolicy("two-approvers", 5).generation(2).obj(), aPolicy("stricter", 4).obj()},
			want: voteWant{decideWant: decideWant{state: hitlv1.StateOpen, unchanged: true},
				approval: twoRule, votes: []hitlv1.Vote{bobVote}, tally: "1/2"},
		},
		{
			name:     "once governed by two approvals, the second settles it though the policies now given ask for five",
			in:       bobApproved().plus(aReply("r2").created(secs(3)).selects("color", "red").by("carol")).at(secs(3)),
			policies: []hitlv1.ApprovalPolicy{aPolicy("two-approvers", 5).generation(2).obj()},
			want: voteWant{decideWant: decideWant{state: hitlv1.StateSettled, transition: hitlv1.StateSettled, answers: red,
				settlement: settledWith("r2", carolUser, false, secs(3), bobVote, aVote("r2", carolUser, approve, secs(3))),
				changes:    []replyWant{applied("r2")}},
				approval: twoRule, votes: []hitlv1.Vote{bobVote, aVote("r2", carolUser, approve, secs(3))}, tally: "2/2"},
		},
		{
			name:     "a question first looked at with no policy stays ungoverned: a policy given later is not applied, the first reply settles it",
			in:       given(approvalQ()).at(secs(1)).reconciled().plus(aReply("r1").created(secs(2)).selects("color", "red").by("bob")).at(secs(2)),
			policies: []hitlv1.ApprovalPolicy{two},
			want: voteWant{decideWant: decideWant{state: hitlv1.StateSettled, transition: hitlv1.StateSettled, answers: red,
				settlement: settledWith("r1", bobUser, false, secs(2)), changes: []replyWant{applied("r1")}}},
		},

		// 2. N of M: each approval is counted, the Nth settles.
		{
			name: "the first approval of two is Counted: one vote, tally 1/2, and the question stays open",
			in:   governed(approvalQ(), two).plus(aReply("r1").created(secs(2)).selects("color", "red").by("bob")).at(secs(2)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateOpen, changes: []replyWant{countedReply("r1")}},
				approval: twoRule, votes: []hitlv1.Vote{bobVote}, tally: "1/2"},
		},
		{
			name: "the second approval, by another identity, settles the question with its answers and both votes",
			in:   bobApproved().plus(aReply("r2").created(secs(3)).selects("color", "red").by("carol")).at(secs(3)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateSettled, transition: hitlv1.StateSettled, answers: red,
				settlement: settledWith("r2", carolUser, false, secs(3), bobVote, aVote("r2", carolUser, approve, secs(3))),
				changes:    []replyWant{applied("r2")}},
				approval: twoRule, votes: []hitlv1.Vote{bobVote, aVote("r2", carolUser, approve, secs(3))}, tally: "2/2"},
		},
		{
			// Both approve the plan; what else they answered differs, and
			// the deciding reply's batch is the one recorded.
			name: "the question's answers are the deciding reply's batch, not the first vote's",
			in: given(aQuestion().planReview("red").asks("size", "S", "M").askedBy(agentUser),
				aReply("r1").created(secs(2)).selects("color", "red").selects("size", "S").by("bob"),
				aReply("r2").created(secs(2)).selects("color", "red").selects("size", "M").by("carol")).at(secs(2)),
			policies: []hitlv1.ApprovalPolicy{two},
			want: voteWant{decideWant: decideWant{state: hitlv1.StateSettled, transition: hitlv1.StateSettled,
				answers:    []hitlv1.AnswerItem{{ID: "color", Selected: []string{"red"}}, {ID: "size", Selected: []string{"M"}}},
				settlement: settledWith("r2", carolUser, false, secs(2), bobVote, aVote("r2", carolUser, approve, secs(2))),
				changes:    []replyWant{countedReply("r1"), applied("r2")}},
				approval: twoRule, votes: []hitlv1.Vote{bobVote, aVote("r2", carolUser, approve, secs(2))}, tally: "2/2"},
		},
		{
			name: "three approvals seen at once under a rule of two: one Counted, one Applied, the third NOT_ANSWERABLE",
			in: given(approvalQ(),
				aReply("r1").created(secs(2)).selects("color", "red").by("bob"),
				aReply("r2").created(secs(2)).selects("color", "red").by("carol"),
				aReply("r3").created(secs(2)).selects("color", "red").by("dave")).at(secs(2)),
			policies: []hitlv1.ApprovalPolicy{two},
			want: voteWant{decideWant: decideWant{state: hitlv1.StateSettled, transition: hitlv1.StateSettled, answers: red,
				settlement: settledWith("r2", carolUser, false, secs(2), bobVote, aVote("r2", carolUser, approve, secs(2))),
				changes:    []replyWant{countedReply("r1"), applied("r2"), closed("r3", "question "+askName, "Settled")}},
				approval: twoRule, votes: []hitlv1.Vote{bobVote, aVote("r2", carolUser, approve, secs(2))}, tally: "2/2"},
		},
		{
			name: "a vote after the settling one is NOT_ANSWERABLE and changes nothing",
			in: bobApproved().plus(aReply("r2").created(secs(3)).selects("color", "red").by("carol")).at(secs(3)).reconciled().
				plus(aReply("r3").created(secs(4)).selects("color", "green").by("dave")).at(secs(4)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateSettled, answers: red,
				settlement: settledWith("r2", carolUser, false, secs(3), bobVote, aVote("r2", carolUser, approve, secs(3))),
				changes:    []replyWant{closedAlone("r3", "Settled")}, unchanged: true},
				approval: twoRule, votes: []hitlv1.Vote{bobVote, aVote("r2", carolUser, approve, secs(3))}, tally: "2/2"},
		},
		{
			name:     "under a policy of one approval the first approving reply settles, its vote recorded",
			in:       given(plainQ(), aReply("r1").created(secs(2)).selects("color", "blue").by("bob")).at(secs(2)),
			policies: []hitlv1.ApprovalPolicy{one},
			want: voteWant{decideWant: decideWant{state: hitlv1.StateSettled, transition: hitlv1.StateSettled,
				answers:    []hitlv1.AnswerItem{{ID: "color", Selected: []string{"blue"}}},
				settlement: settledWith("r1", bobUser, false, secs(2), bobVote), changes: []replyWant{applied("r1")}},
				approval: oneRule, votes: []hitlv1.Vote{bobVote}, tally: "1/1"},
		},
		{
			name: "an invalid batch is BAD_ANSWER and is no vote",
			in:   governed(approvalQ(), two).plus(aReply("r1").created(secs(2)).selects("color", "purple").by("bob")).at(secs(2)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateOpen, changes: []replyWant{rejected("r1", hitlv1.CodeBadAnswer, "question color")}},
				approval: twoRule, tally: "0/2"},
		},
		{
			name: "a reply without an author is FORBIDDEN and is no vote",
			in:   governed(approvalQ(), two).plus(aReply("r1").created(secs(2)).selects("color", "red").byUser(nil)).at(secs(2)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateOpen, changes: []replyWant{refused("r1", hitlv1.CodeForbidden, "spec.answeredBy")}},
				approval: twoRule, tally: "0/2"},
		},

		// 3. Rejections: a veto, or as many rejections as approvals.
		{
			name: "with the default veto, one rejecting vote settles the question with the rejecting answers",
			in:   bobApproved().plus(aReply("r2").created(secs(3)).selects("color", "green").by("carol")).at(secs(3)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateSettled, transition: hitlv1.StateSettled, answers: green,
				settlement: settledWith("r2", carolUser, false, secs(3), bobVote, aVote("r2", carolUser, reject, secs(3))),
				changes:    []replyWant{applied("r2")}},
				approval: twoRule, votes: []hitlv1.Vote{bobVote, aVote("r2", carolUser, reject, secs(3))}, tally: "1/2 (1 no)"},
		},
		{
			name: "a veto as the first vote settles the question at once",
			in:   governed(approvalQ(), two).plus(aReply("r1").created(secs(2)).selects("color", "green").by("bob")).at(secs(2)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateSettled, transition: hitlv1.StateSettled, answers: green,
				settlement: settledWith("r1", bobUser, false, secs(2), aVote("r1", bobUser, reject, secs(2))),
				changes:    []replyWant{applied("r1")}},
				approval: twoRule, votes: []hitlv1.Vote{aVote("r1", bobUser, reject, secs(2))}, tally: "0/2 (1 no)"},
		},
		{
			name: "a veto seen with other votes decides in creation order: the approvals after it are NOT_ANSWERABLE",
			in: given(approvalQ(),
				aReply("r1").created(secs(2)).selects("color", "red").by("bob"),
				aReply("r2").created(secs(2)).selects("color", "green").by("carol"),
				aReply("r3").created(secs(2)).selects("color", "red").by("dave")).at(secs(2)),
			policies: []hitlv1.ApprovalPolicy{two},
			want: voteWant{decideWant: decideWant{state: hitlv1.StateSettled, transition: hitlv1.StateSettled, answers: green,
				settlement: settledWith("r2", carolUser, false, secs(2), bobVote, aVote("r2", carolUser, reject, secs(2))),
				changes:    []replyWant{countedReply("r1"), applied("r2"), closed("r3", "Settled")}},
				approval: twoRule, votes: []hitlv1.Vote{bobVote, aVote("r2", carolUser, reject, secs(2))}, tally: "1/2 (1 no)"},
		},
		{
			name: "without a veto a rejection is Counted and the question stays open",
			in:   governed(approvalQ(), noVeto).plus(aReply("r1").created(secs(2)).selects("color", "green").by("bob")).at(secs(2)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateOpen, changes: []replyWant{countedReply("r1")}},
				approval: noVetoRule, votes: []hitlv1.Vote{aVote("r1", bobUser, reject, secs(2))}, tally: "0/2 (1 no)"},
		},
		{
			name: "without a veto, as many distinct rejections as approvals settle the question as rejected, with the last one's answers",
			in: governed(approvalQ(), noVeto).plus(aReply("r1").created(secs(2)).selects("color", "green").by("bob")).at(secs(2)).reconciled().
				plus(aReply("r2").created(secs(3)).selects("color", "green").by("carol")).at(secs(3)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateSettled, transition: hitlv1.StateSettled, answers: green,
				settlement: settledWith("r2", carolUser, false, secs(3), aVote("r1", bobUser, reject, secs(2)), aVote("r2", carolUser, reject, secs(3))),
				changes:    []replyWant{applied("r2")}},
				approval: noVetoRule, votes: []hitlv1.Vote{aVote("r1", bobUser, reject, secs(2)), aVote("r2", carolUser, reject, secs(3))}, tally: "0/2 (2 no)"},
		},
		{
			name: "without a veto, one rejection and then two approvals settle the question as approved",
			in: given(approvalQ(),
				aReply("r1").created(secs(2)).selects("color", "green").by("bob"),
				aReply("r2").created(secs(2)).selects("color", "red").by("carol"),
				aReply("r3").created(secs(2)).selects("color", "red").by("dave")).at(secs(2)),
			policies: []hitlv1.ApprovalPolicy{noVeto},
			want: voteWant{decideWant: decideWant{state: hitlv1.StateSettled, transition: hitlv1.StateSettled, answers: red,
				settlement: settledWith("r3", daveUser, false, secs(2),
					aVote("r1", bobUser, reject, secs(2)), aVote("r2", carolUser, approve, secs(2)), aVote("r3", daveUser, approve, secs(2))),
				changes: []replyWant{countedReply("r1"), countedReply("r2"), applied("r3")}},
				approval: noVetoRule, tally: "2/2 (1 no)",
				votes: []hitlv1.Vote{aVote("r1", bobUser, reject, secs(2)), aVote("r2", carolUser, approve, secs(2)), aVote("r3", daveUser, approve, secs(2))}},
		},

		// 4. Sets of approvers with their minimums.
		{
			name: "two approvals from outside the sre set do not settle: both Counted, tally 2/2",
			in: governed(approvalQ(), gate).plus(
				aReply("r1").created(secs(2)).selects("color", "red").by("bob"),
				aReply("r2").created(secs(2)).selects("color", "red").by("carol")).at(secs(2)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateOpen, changes: []replyWant{countedReply("r1"), countedReply("r2")}},
				approval: gateRule, votes: []hitlv1.Vote{bobVote, aVote("r2", carolUser, approve, secs(2))}, tally: "2/2"},
		},
		{
			name: "a third approval, from the group sre, meets the set's minimum and settles; its vote names the set",
			in: governed(approvalQ(), gate).plus(
				aReply("r1").created(secs(2)).selects("color", "red").by("bob"),
				aReply("r2").created(secs(2)).selects("color", "red").by("carol")).at(secs(2)).reconciled().
				plus(aReply("r3").created(secs(3)).selects("color", "red").byUser(frankUser)).at(secs(3)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateSettled, transition: hitlv1.StateSettled, answers: red,
				settlement: settledWith("r3", frankUser, false, secs(3),
					bobVote, aVote("r2", carolUser, approve, secs(2)), aVote("r3", frankUser, approve, secs(3), "prod-gate/sre")),
				changes: []replyWant{applied("r3")}},
				approval: gateRule, tally: "3/2",
				votes: []hitlv1.Vote{bobVote, aVote("r2", carolUser, approve, secs(2)), aVote("r3", frankUser, approve, secs(3), "prod-gate/sre")}},
		},
		{
			name: "the set's member approving first does not settle alone: the rule still needs two approvals",
			in:   governed(approvalQ(), gate).plus(aReply("r1").created(secs(2)).selects("color", "red").byUser(frankUser)).at(secs(2)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateOpen, changes: []replyWant{countedReply("r1")}},
				approval: gateRule, votes: []hitlv1.Vote{aVote("r1", frankUser, approve, secs(2), "prod-gate/sre")}, tally: "1/2"},
		},
		{
			name: "a set of users: dave's approval, with another's, settles",
			in: governed(approvalQ(), leads).plus(
				aReply("r1").created(secs(2)).selects("color", "red").by("bob"),
				aReply("r2").created(secs(2)).selects("color", "red").by("dave")).at(secs(2)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateSettled, transition: hitlv1.StateSettled, answers: red,
				settlement: settledWith("r2", daveUser, false, secs(2), bobVote, aVote("r2", daveUser, approve, secs(2), "prod-gate/leads")),
				changes:    []replyWant{countedReply("r1"), applied("r2")}},
				approval: leadsRule, votes: []hitlv1.Vote{bobVote, aVote("r2", daveUser, approve, secs(2), "prod-gate/leads")}, tally: "2/2"},
		},
		{
			name: "a rejection by a set's member names no set",
			in: governed(approvalQ(), aPolicy("prod-gate", 2).from("sre", 1, "sre").veto(false).obj()).
				plus(aReply("r1").created(secs(2)).selects("color", "green").byUser(frankUser)).at(secs(2)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateOpen, changes: []replyWant{countedReply("r1")}},
				approval: &hitlv1.EffectiveApproval{Approvals: 2, ExcludeRequester: true, From: gateRule.From, Policies: gateRule.Policies},
				votes:    []hitlv1.Vote{aVote("r1", frankUser, reject, secs(2))}, tally: "0/2 (1 no)"},
		},

		// 5. One vote per identity, never the requester's.
		{
			name: "a second vote by the same identity is DUPLICATE_VOTE and is not counted",
			in:   bobApproved().plus(aReply("r2").created(secs(3)).selects("color", "red").by("bob")).at(secs(3)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateOpen, unchanged: true,
				changes: []replyWant{rejected("r2", hitlv1.CodeDuplicateVote, "bob has already voted", "question "+askName)}},
				approval: twoRule, votes: []hitlv1.Vote{bobVote}, tally: "1/2"},
		},
		{
			name: "two votes by one identity seen at once: the first counts, the second's rejection vetoes nothing",
			in: governed(approvalQ(), two).plus(
				aReply("r1").created(secs(2)).selects("color", "red").by("bob"),
				aReply("r2").created(secs(2)).selects("color", "green").by("bob")).at(secs(2)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateOpen,
				changes: []replyWant{countedReply("r1"), rejected("r2", hitlv1.CodeDuplicateVote, "bob")}},
				approval: twoRule, votes: []hitlv1.Vote{bobVote}, tally: "1/2"},
		},
		{
			// Votes are counted per username: an account re-created under
			// the same name is the same approver.
			name: "a vote by the same username with another UID is still a DUPLICATE_VOTE",
			in: bobApproved().plus(aReply("r2").created(secs(3)).selects("color", "red").
				byUser(&hitlv1.UserInfo{Username: "bob", UID: "uid-bob-2"})).at(secs(3)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateOpen, unchanged: true,
				changes: []replyWant{rejected("r2", hitlv1.CodeDuplicateVote, "bob")}},
				approval: twoRule, votes: []hitlv1.Vote{bobVote}, tally: "1/2"},
		},
		{
			// Replies are followed by UID: the name of a counted reply,
			// re-used, is another reply.
			name: "a reply re-created under a counted reply's name is a new vote: another identity's approval settles",
			in: bobApproved().gone("r1").
				plus(aReply("r1").uid("uid-r1-again").created(secs(3)).selects("color", "red").by("carol")).at(secs(3)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateSettled, transition: hitlv1.StateSettled, answers: red,
				settlement: &hitlv1.Settlement{Reply: "r1", ReplyUID: "uid-r1-again", AnsweredBy: carolUser, At: metav1.NewMicroTime(secs(3)),
					Votes: []hitlv1.Vote{bobVote, {Reply: "r1", ReplyUID: "uid-r1-again", By: *carolUser, Choice: approve, At: metav1.NewMicroTime(secs(3))}}},
				changes: []replyWant{applied("r1")}},
				approval: twoRule, tally: "2/2",
				votes: []hitlv1.Vote{bobVote, {Reply: "r1", ReplyUID: "uid-r1-again", By: *carolUser, Choice: approve, At: metav1.NewMicroTime(secs(3))}}},
		},
		{
			name: "a counted reply deleted and re-created by its author is a DUPLICATE_VOTE: the vote stays",
			in: bobApproved().gone("r1").
				plus(aReply("r1").uid("uid-r1-again").created(secs(3)).selects("color", "green").by("bob")).at(secs(3)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateOpen, unchanged: true,
				changes: []replyWant{rejected("r1", hitlv1.CodeDuplicateVote, "bob")}},
				approval: twoRule, votes: []hitlv1.Vote{bobVote}, tally: "1/2"},
		},
		{
			name: "the requester's vote on its Approval question is SELF_APPROVAL and not counted",
			in:   governed(approvalQ(), two).plus(aReply("r1").created(secs(2)).selects("color", "red").byUser(agentUser)).at(secs(2)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateOpen, changes: []replyWant{refused("r1", hitlv1.CodeSelfApproval, "spec.askedBy")}},
				approval: twoRule, tally: "0/2"},
		},
		{
			name: "the requester's vote on a question without an intent is SELF_APPROVAL when the rule excludes the requester",
			in:   governed(plainQ(), two).plus(aReply("r1").created(secs(2)).selects("color", "red").byUser(agentUser)).at(secs(2)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateOpen,
				changes: []replyWant{refused("r1", hitlv1.CodeSelfApproval, agentUser.Username+" asked question "+askName, "status.approval.excludeRequester")}},
				approval: twoRule, tally: "0/2"},
		},
		{
			name: "the requester's vote without its UID is still the requester's: SELF_APPROVAL",
			in: governed(plainQ(), two).plus(aReply("r1").created(secs(2)).selects("color", "red").
				byUser(&hitlv1.UserInfo{Username: agentUser.Username})).at(secs(2)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateOpen,
				changes: []replyWant{refused("r1", hitlv1.CodeSelfApproval, "status.approval.excludeRequester")}},
				approval: twoRule, tally: "0/2"},
		},
		{
			name: "when no source excludes the requester, its vote on a question without an intent is Counted",
			in:   governed(plainQ(), mayAnswerOwn).plus(aReply("r1").created(secs(2)).selects("color", "red").byUser(agentUser)).at(secs(2)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateOpen, changes: []replyWant{countedReply("r1")}},
				approval: mayAnswerOwnRule, votes: []hitlv1.Vote{aVote("r1", agentUser, approve, secs(2))}, tally: "1/2"},
		},
		{
			name: "a rule that does not exclude the requester never lets it answer its own Approval question",
			in:   governed(approvalQ(), mayAnswerOwn).plus(aReply("r1").created(secs(2)).selects("color", "red").byUser(agentUser)).at(secs(2)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateOpen, changes: []replyWant{refused("r1", hitlv1.CodeSelfApproval, "spec.askedBy")}},
				approval: mayAnswerOwnRule, tally: "0/2"},
		},

		// 6. A reply prepared for another question (spec.questionRef.specDigest).
		{
			name: "a reply whose specDigest is not the question's is QUESTION_CHANGED and is no vote",
			in:   governed(approvalQ(), two).plus(aReply("r1").created(secs(2)).selects("color", "red").by("bob").digest(zeroDigest)).at(secs(2)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateOpen, unchanged: true,
				changes: []replyWant{refused("r1", hitlv1.CodeQuestionChanged, zeroDigest, "spec.questionRef.specDigest", hitlv1.SpecDigest(&approvalQ().q.Spec))}},
				approval: twoRule, tally: "0/2"},
		},
		{
			name: "a reply whose specDigest is the question's is counted",
			in: governed(approvalQ(), two).plus(aReply("r1").created(secs(2)).selects("color", "red").by("bob").
				digest(hitlv1.SpecDigest(&approvalQ().q.Spec))).at(secs(2)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateOpen, changes: []replyWant{countedReply("r1")}},
				approval: twoRule, votes: []hitlv1.Vote{bobVote}, tally: "1/2"},
		},
		{
			name: "a reply prepared for the same questions without spec.approval is QUESTION_CHANGED: the rule is part of what is asked",
			in: given(approvalQ().requires(hitlv1.ApprovalRule{Approvals: 2}),
				aReply("r1").created(secs(2)).selects("color", "red").by("bob").digest(hitlv1.SpecDigest(&approvalQ().q.Spec))).at(secs(2)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateOpen, changes: []replyWant{refused("r1", hitlv1.CodeQuestionChanged)}},
				approval: &hitlv1.EffectiveApproval{Approvals: 2, Veto: true, ExcludeRequester: true}, tally: "0/2"},
		},
		{
			name: "an ungoverned question checks the digest too: QUESTION_CHANGED, and the question stays open",
			in:   given(approvalQ(), aReply("r1").created(secs(2)).selects("color", "red").by("bob").digest(zeroDigest)).at(secs(2)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateOpen, changes: []replyWant{refused("r1", hitlv1.CodeQuestionChanged)}}},
		},

		// 7. The window: votes outlive it; the deciding vote after it waits
		// for the agent.
		{
			name: "a vote inside a timed window is Counted and the question waits for its deadline",
			in:   timedReview().plus(aReply("r1").created(secs(2)).selects("color", "red").by("bob")).at(secs(2)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateOpen, deadline: secs(3), requeue: s, changes: []replyWant{countedReply("r1")}},
				approval: twoRule, votes: []hitlv1.Vote{bobVote}, tally: "1/2"},
		},
		{
			name: "the window closes one approval short: Continued, with its votes",
			in:   withBob().at(secs(3)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateContinued, transition: hitlv1.StateContinued, deadline: secs(3), continuedAt: secs(3)},
				approval: twoRule, votes: []hitlv1.Vote{bobVote}, tally: "1/2"},
		},
		{
			name: "a vote created in the window that completes the quorum settles the question though seen after the deadline",
			in:   withBob().plus(aReply("r2").created(secs(2)).selects("color", "red").by("carol")).at(secs(5)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateSettled, transition: hitlv1.StateSettled, deadline: secs(3), answers: red,
				settlement: settledWith("r2", carolUser, false, secs(5), bobVote, aVote("r2", carolUser, approve, secs(5))),
				changes:    []replyWant{applied("r2")}},
				approval: twoRule, votes: []hitlv1.Vote{bobVote, aVote("r2", carolUser, approve, secs(5))}, tally: "2/2"},
		},
		{
			name: "a late vote that does not decide closes the window of a question still open and is Counted",
			in:   timedReview().plus(aReply("r1").created(secs(5)).selects("color", "red").by("bob")).at(secs(6)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateContinued, transition: hitlv1.StateContinued, deadline: secs(3), continuedAt: secs(6),
				changes: []replyWant{countedReply("r1")}},
				approval: twoRule, votes: []hitlv1.Vote{aVote("r1", bobUser, approve, secs(6))}, tally: "1/2"},
		},
		{
			name: "a late vote that completes the quorum is queued for the agent to admit",
			in:   closedWithBob().plus(aReply("r2").created(secs(10)).selects("color", "red").by("carol")).at(secs(10)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateContinued, deadline: secs(3), continuedAt: secs(3),
				queued: queued("r2", red, carolUser, secs(10)), changes: []replyWant{queuedOutcome("r2")}},
				approval: twoRule, votes: []hitlv1.Vote{bobVote, carolVote}, tally: "2/2"},
		},
		{
			name: "a vote while the deciding one is queued is REPLY_QUEUED and not counted",
			in:   carolQueued().plus(aReply("r3").created(secs(20)).selects("color", "green").by("dave")).at(secs(20)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateContinued, deadline: secs(3), continuedAt: secs(3),
				queued: queued("r2", red, carolUser, secs(10)), changes: []replyWant{rejected("r3", hitlv1.CodeReplyQueued, "r2")}},
				approval: twoRule, votes: []hitlv1.Vote{bobVote, carolVote}, tally: "2/2"},
		},
		{
			name: "the agent admits the queued deciding vote: Settled late with every vote, the reply Admitted",
			in:   carolQueued().agentAdmits("r2").at(secs(30)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateSettled, transition: hitlv1.StateSettled, deadline: secs(3), continuedAt: secs(3),
				answers: red, settlement: settledWith("r2", carolUser, true, secs(30), bobVote, carolVote), changes: []replyWant{admitted("r2")}},
				approval: twoRule, votes: []hitlv1.Vote{bobVote, carolVote}, tally: "2/2"},
		},
		{
			name: "a late veto is queued too, and once admitted settles the question with the rejecting answers",
			in: closedWithBob().plus(aReply("r2").created(secs(10)).selects("color", "green").by("carol")).at(secs(10)).reconciled().
				agentAdmits("r2").at(secs(30)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateSettled, transition: hitlv1.StateSettled, deadline: secs(3), continuedAt: secs(3),
				answers: green, settlement: settledWith("r2", carolUser, true, secs(30), bobVote, aVote("r2", carolUser, reject, secs(10))),
				changes: []replyWant{admitted("r2")}},
				approval: twoRule, votes: []hitlv1.Vote{bobVote, aVote("r2", carolUser, reject, secs(10))}, tally: "1/2 (1 no)"},
		},
		{
			name: "the queued deciding vote withdrawn: its vote is dropped and nothing is queued",
			in:   carolQueued().gone("r2").at(secs(40)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateContinued, deadline: secs(3), continuedAt: secs(3)},
				approval: twoRule, votes: []hitlv1.Vote{bobVote}, tally: "1/2"},
		},
		{
			name: "the queued deciding vote being deleted is withdrawn the same",
			in:   carolQueued().at(secs(40)).deleting("r2"),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateContinued, deadline: secs(3), continuedAt: secs(3)},
				approval: twoRule, votes: []hitlv1.Vote{bobVote}, tally: "1/2"},
		},
		{
			name: "after the withdrawal the next approver's vote decides again and is queued",
			in:   carolQueued().gone("r2").plus(aReply("r3").created(secs(40)).selects("color", "red").by("dave")).at(secs(41)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateContinued, deadline: secs(3), continuedAt: secs(3),
				queued: queued("r3", red, daveUser, secs(41)), changes: []replyWant{queuedOutcome("r3")}},
				approval: twoRule, votes: []hitlv1.Vote{bobVote, aVote("r3", daveUser, approve, secs(41))}, tally: "2/2"},
		},
		{
			name: "the identity whose queued vote was withdrawn may vote again",
			in:   carolQueued().gone("r2").plus(aReply("r2b").created(secs(40)).selects("color", "red").by("carol")).at(secs(41)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateContinued, deadline: secs(3), continuedAt: secs(3),
				queued: queued("r2b", red, carolUser, secs(41)), changes: []replyWant{queuedOutcome("r2b")}},
				approval: twoRule, votes: []hitlv1.Vote{bobVote, aVote("r2b", carolUser, approve, secs(41))}, tally: "2/2"},
		},
		{
			name: "admitting after the queued vote was withdrawn changes nothing",
			in:   carolQueued().gone("r2").at(secs(40)).reconciled().agentAdmits("r2").at(secs(50)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateContinued, deadline: secs(3), continuedAt: secs(3)},
				approval: twoRule, votes: []hitlv1.Vote{bobVote}, tally: "1/2"},
		},
		{
			// As on an ungoverned question: the queued reply changed
			// nothing, so it is not answerable, and no vote stands for it.
			name: "cancelling a question whose deciding vote is queued: the reply is NOT_ANSWERABLE and its vote is dropped",
			in:   carolQueued().agentCancels().at(secs(30)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateCancelled, transition: hitlv1.StateCancelled, deadline: secs(3), continuedAt: secs(3),
				changes: []replyWant{closed("r2", "question "+askName, "Cancelled")}},
				approval: twoRule, votes: []hitlv1.Vote{bobVote}, tally: "1/2"},
		},
		{
			name: "cancelling a question with counted votes keeps them: they were counted",
			in:   bobApproved().agentCancels().at(secs(30)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateCancelled, transition: hitlv1.StateCancelled},
				approval: twoRule, votes: []hitlv1.Vote{bobVote}, tally: "1/2"},
		},

		// 8. Crash recovery: a vote in status.votes is the reply's, Counted.
		{
			name: "a crash after counting: the reply's outcome is restored as Counted, not DUPLICATE_VOTE",
			in: governed(approvalQ(), two).plus(aReply("r1").created(secs(2)).selects("color", "red").by("bob")).at(secs(2)).
				crashedAfterQuestionWrite().at(secs(3)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateOpen, changes: []replyWant{recounted("r1")}, unchanged: true},
				approval: twoRule, votes: []hitlv1.Vote{bobVote}, tally: "1/2"},
		},
		{
			name: "a crash after settling by quorum: the votes' outcomes are restored, Counted and Applied",
			in: governed(approvalQ(), two).plus(
				aReply("r1").created(secs(2)).selects("color", "red").by("bob"),
				aReply("r2").created(secs(2)).selects("color", "red").by("carol")).at(secs(2)).
				crashedAfterQuestionWrite().at(secs(3)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateSettled, answers: red,
				settlement: settledWith("r2", carolUser, false, secs(2), bobVote, aVote("r2", carolUser, approve, secs(2))),
				changes:    []replyWant{recounted("r1"), applied("r2")}, unchanged: true},
				approval: twoRule, votes: []hitlv1.Vote{bobVote, aVote("r2", carolUser, approve, secs(2))}, tally: "2/2"},
		},
		{
			name: "a crash after queueing the deciding vote: its outcome is restored as Queued",
			in: closedWithBob().plus(aReply("r2").created(secs(10)).selects("color", "red").by("carol")).at(secs(10)).
				crashedAfterQuestionWrite().at(secs(11)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateContinued, deadline: secs(3), continuedAt: secs(3),
				queued: queued("r2", red, carolUser, secs(10)), changes: []replyWant{queuedOutcome("r2")}, unchanged: true},
				approval: twoRule, votes: []hitlv1.Vote{bobVote, carolVote}, tally: "2/2"},
		},

		// 9. status.votes holds at most MaxVotes.
		{
			name: "64 votes that do not decide are all Counted",
			in:   governed(approvalQ(), gate).plus(voters(hitlv1.MaxVotes)...).at(secs(2)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateOpen, changes: votersCounted(hitlv1.MaxVotes)},
				approval: gateRule, votes: votersVotes(hitlv1.MaxVotes, secs(2)), tally: "64/2"},
		},
		{
			name: "a 65th vote is NOT_ANSWERABLE, even one that would decide, and changes nothing",
			in: governed(approvalQ(), gate).plus(voters(hitlv1.MaxVotes)...).at(secs(2)).reconciled().
				plus(aReply("r65").created(secs(3)).selects("color", "red").byUser(frankUser)).at(secs(3)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateOpen, unchanged: true,
				changes: []replyWant{rejected("r65", hitlv1.CodeNotAnswerable, "64 votes", "status.votes")}},
				approval: gateRule, votes: votersVotes(hitlv1.MaxVotes, secs(2)), tally: "64/2"},
		},
		{
			name: "65 votes seen at once: the first 64 are Counted, the 65th NOT_ANSWERABLE",
			in:   governed(approvalQ(), gate).plus(voters(hitlv1.MaxVotes + 1)...).at(secs(2)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateOpen,
				changes: append(votersCounted(hitlv1.MaxVotes), rejected("v64", hitlv1.CodeNotAnswerable, "64 votes"))},
				approval: gateRule, votes: votersVotes(hitlv1.MaxVotes, secs(2)), tally: "64/2"},
		},
		{
			name: "at 64 votes a second vote by a voter is still DUPLICATE_VOTE",
			in: governed(approvalQ(), gate).plus(voters(hitlv1.MaxVotes)...).at(secs(2)).reconciled().
				plus(aReply("again").created(secs(3)).selects("color", "red").by("voter-07")).at(secs(3)),
			want: voteWant{decideWant: decideWant{state: hitlv1.StateOpen, unchanged: true,
				changes: []replyWant{rejected("again", hitlv1.CodeDuplicateVote, "voter-07")}},
				approval: gateRule, votes: votersVotes(hitlv1.MaxVotes, secs(2)), tally: "64/2"},
		},
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { decideUnder(t, tc.in, tc.policies, tc.want) })
	}
}

func TestEffectiveApproval(t *testing.T) {
	sre := hitlv1.ApproverSet{Name: "sre", Groups: []string{"sre"}, Minimum: 1}
	ref := func(name string, generation int64) hitlv1.PolicyReference {
		return hitlv1.PolicyReference{Name: name, Generation: generation}
	}
	// manyPolicies is n policies, p-00 to p-<n-1>, given in reverse; the
	// last by name asks for 9 approvals, the others for 2.
	manyPolicies := func(n int) []hitlv1.ApprovalPolicy {
		var ps []hitlv1.ApprovalPolicy
		for i := n - 1; i >= 0; i-- {
			approvals := int32(2)
			if i == n-1 {
				approvals = 9
			}
			ps = append(ps, aPolicy(fmt.Sprintf("p-%02d", i), approvals).generation(int64(i+1)).obj())
		}
		return ps
	}
	manyRefs := func(n int) []hitlv1.PolicyReference {
		var rs []hitlv1.PolicyReference
		for i := range n {
			rs = append(rs, ref(fmt.Sprintf("p-%02d", i), int64(i+1)))
		}
		return rs
	}

	cases := []struct {
		name     string
		own      *hitlv1.ApprovalRule
		policies []hitlv1.ApprovalPolicy
		want     *hitlv1.EffectiveApproval
	}{
		{
			name: "no policy and no spec.approval: the question is ungoverned",
		},
		{
			name:     "an empty list of policies and no spec.approval: ungoverned",
			policies: []hitlv1.ApprovalPolicy{},
		},
		{
			name: "spec.approval alone: its sets keep their names, veto and excludeRequester default to true, no policy recorded",
			own:  &hitlv1.ApprovalRule{Approvals: 2, From: []hitlv1.ApproverSet{sre}},
			want: &hitlv1.EffectiveApproval{Approvals: 2, Veto: true, ExcludeRequester: true,
				From: []hitlv1.ApproverSet{{Name: "sre", Groups: []string{"sre"}, Minimum: 1}}},
		},
		{
			name: "spec.approval turning off the veto and the requester's exclusion, alone, turns them off",
			own:  &hitlv1.ApprovalRule{Approvals: 1, Veto: ptr.To(false), ExcludeRequester: ptr.To(false)},
			want: &hitlv1.EffectiveApproval{Approvals: 1},
		},
		{
			name:     "one policy: its rule, and the policy recorded at the generation read",
			policies: []hitlv1.ApprovalPolicy{aPolicy("gate", 3).generation(4).obj()},
			want:     &hitlv1.EffectiveApproval{Approvals: 3, Veto: true, ExcludeRequester: true, Policies: []hitlv1.PolicyReference{ref("gate", 4)}},
		},
		{
			name:     "the most approvals of all the policies and spec.approval",
			own:      &hitlv1.ApprovalRule{Approvals: 2},
			policies: []hitlv1.ApprovalPolicy{aPolicy("a", 4).obj(), aPolicy("b", 3).obj()},
			want: &hitlv1.EffectiveApproval{Approvals: 4, Veto: true, ExcludeRequester: true,
				Policies: []hitlv1.PolicyReference{ref("a", 1), ref("b", 1)}},
		},
		{
			name:     "spec.approval may ask for more than the policies",
			own:      &hitlv1.ApprovalRule{Approvals: 5},
			policies: []hitlv1.ApprovalPolicy{aPolicy("a", 2).obj()},
			want:     &hitlv1.EffectiveApproval{Approvals: 5, Veto: true, ExcludeRequester: true, Policies: []hitlv1.PolicyReference{ref("a", 1)}},
		},
		{
			name: "every set of every source, each named after its source, sorted by name",
			own:  &hitlv1.ApprovalRule{Approvals: 2, From: []hitlv1.ApproverSet{sre}},
			policies: []hitlv1.ApprovalPolicy{
				aPolicy("b-gate", 2).from("sre", 1, "sre").fromUsers("leads", 1, "dave").obj(),
				aPolicy("a-gate", 3).from("sre", 2, "platform").obj(),
			},
			want: &hitlv1.EffectiveApproval{Approvals: 3, Veto: true, ExcludeRequester: true,
				From: []hitlv1.ApproverSet{
					{Name: "a-gate/sre", Groups: []string{"platform"}, Minimum: 2},
					{Name: "b-gate/leads", Users: []string{"dave"}, Minimum: 1},
					{Name: "b-gate/sre", Groups: []string{"sre"}, Minimum: 1},
					{Name: "sre", Groups: []string{"sre"}, Minimum: 1},
				},
				Policies: []hitlv1.PolicyReference{ref("a-gate", 1), ref("b-gate", 1)}},
		},
		{
			name:     "a veto when any source has one: a policy that leaves it unset has the default, true",
			own:      &hitlv1.ApprovalRule{Approvals: 2, Veto: ptr.To(false), ExcludeRequester: ptr.To(false)},
			policies: []hitlv1.ApprovalPolicy{aPolicy("a", 2).excludeRequester(false).obj()},
			want:     &hitlv1.EffectiveApproval{Approvals: 2, Veto: true, Policies: []hitlv1.PolicyReference{ref("a", 1)}},
		},
		{
			name:     "the requester excluded when any source excludes it: a policy that leaves it unset has the default, true",
			own:      &hitlv1.ApprovalRule{Approvals: 2, Veto: ptr.To(false), ExcludeRequester: ptr.To(false)},
			policies: []hitlv1.ApprovalPolicy{aPolicy("a", 2).veto(false).obj()},
			want:     &hitlv1.EffectiveApproval{Approvals: 2, ExcludeRequester: true, Policies: []hitlv1.PolicyReference{ref("a", 1)}},
		},
		{
			name: "a veto and the requester excluded when only one of several policies asks for them",
			policies: []hitlv1.ApprovalPolicy{
				aPolicy("a", 2).veto(false).excludeRequester(false).obj(),
				aPolicy("b", 2).veto(true).excludeRequester(true).obj(),
				aPolicy("c", 2).veto(false).excludeRequester(false).obj(),
			},
			want: &hitlv1.EffectiveApproval{Approvals: 2, Veto: true, ExcludeRequester: true,
				Policies: []hitlv1.PolicyReference{ref("a", 1), ref("b", 1), ref("c", 1)}},
		},
		{
			name: "no veto and the requester allowed only when every source says so",
			own:  &hitlv1.ApprovalRule{Approvals: 1, Veto: ptr.To(false), ExcludeRequester: ptr.To(false)},
			policies: []hitlv1.ApprovalPolicy{
				aPolicy("a", 2).veto(false).excludeRequester(false).obj(),
				aPolicy("b", 1).veto(false).excludeRequester(false).obj(),
			},
			want: &hitlv1.EffectiveApproval{Approvals: 2, Policies: []hitlv1.PolicyReference{ref("a", 1), ref("b", 1)}},
		},
		{
			name: "the policies are recorded sorted by name, each at its generation, whatever order they come in",
			policies: []hitlv1.ApprovalPolicy{
				aPolicy("zeta", 1).generation(3).obj(), aPolicy("alpha", 1).generation(7).obj(), aPolicy("mid", 1).generation(1).obj(),
			},
			want: &hitlv1.EffectiveApproval{Approvals: 1, Veto: true, ExcludeRequester: true,
				Policies: []hitlv1.PolicyReference{ref("alpha", 7), ref("mid", 1), ref("zeta", 3)}},
		},
		{
			// 64 is the schema's bound on status.approval.policies.
			name:     "of 65 policies the first 64 by name are recorded, and every one's rule counts",
			policies: manyPolicies(65),
			want:     &hitlv1.EffectiveApproval{Approvals: 9, Veto: true, ExcludeRequester: true, Policies: manyRefs(64)},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			own, policies := tc.own.DeepCopy(), slices.Clone(tc.policies)
			for i := range policies {
				policies[i] = *policies[i].DeepCopy()
			}
			got := effectiveApproval(tc.own, tc.policies)
			if !equality.Semantic.DeepEqual(got, tc.want) {
				t.Errorf("effectiveApproval =\n %s\nwant\n %s", dump(got), dump(tc.want))
			}
			if !equality.Semantic.DeepEqual(tc.own, own) || !equality.Semantic.DeepEqual(tc.policies, policies) {
				t.Errorf("effectiveApproval changed its inputs: own %s, policies %s", dump(tc.own), dump(tc.policies))
			}
			if tc.want != nil {
				if len(got.From) > 256 || len(got.Policies) > 64 {
					t.Errorf("status.approval exceeds the schema's bounds: %d sets, %d policies", len(got.From), len(got.Policies))
				}
			}
		})
	}
}

func TestGoverns(t *testing.T) {
	// The questions: plain asks "color" with no intent, of agent coder;
	// approval has an Approval intent; review two questions, the second a
	// PlanReview.
	plain := aQuestion().q
	approval := aQuestion().approval("red", "green").q
	review := aQuestion().asks("plan", "ok", "no").planReview("ok").q
	other := aQuestion().q
	other.Spec.Agent = "reviewer"

	selector := func(labels map[string]string, exprs ...metav1.LabelSelectorRequirement) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: labels, MatchExpressions: exprs}
	}
	expr := func(key string, op metav1.LabelSelectorOperator, values ...string) metav1.LabelSelectorRequirement {
		return metav1.LabelSelectorRequirement{Key: key, Operator: op, Values: values}
	}
	payments := map[string]string{"team": "payments"}

	cases := []struct {
		name   string
		policy *apBuilder
		q      hitlv1.UserQuestion
		labels map[string]string
		want   bool
	}{
		{name: "an empty selector governs every question", policy: aPolicy("p", 2), q: plain, want: true},
		{name: "an empty selector governs a question with labels too", policy: aPolicy("p", 2), q: approval, labels: payments, want: true},

		{name: "agents: a question of one of them is governed", policy: aPolicy("p", 2).agents("reviewer", "coder"), q: plain, want: true},
		{name: "agents: a question of another agent is not", policy: aPolicy("p", 2).agents("reviewer"), q: plain, want: false},
		{name: "agents: the question's agent decides, not its name", policy: aPolicy("p", 2).agents("reviewer"), q: other, want: true},

		{name: "intents: a question with an Approval intent is governed by an Approval policy",
			policy: aPolicy("p", 2).intents(hitlv1.IntentApproval), q: approval, want: true},
		{name: "intents: a question without an intent is not governed by an intents selector",
			policy: aPolicy("p", 2).intents(hitlv1.IntentApproval), q: plain, want: false},
		{name: "intents: a PlanReview question is not governed by an Approval policy",
			policy: aPolicy("p", 2).intents(hitlv1.IntentApproval), q: review, want: false},
		{name: "intents: one question of the ask with the intent is enough",
			policy: aPolicy("p", 2).intents(hitlv1.IntentPlanReview), q: review, want: true},
		{name: "intents: any of the selector's intents",
			policy: aPolicy("p", 2).intents(hitlv1.IntentApproval, hitlv1.IntentPlanReview), q: review, want: true},

		{name: "matchLabels: a question with those labels, and more, is governed",
			policy: aPolicy("p", 2).selecting(selector(payments)), q: plain, labels: map[string]string{"team": "payments", "tier": "1"}, want: true},
		{name: "matchLabels: another value is not",
			policy: aPolicy("p", 2).selecting(selector(payments)), q: plain, labels: map[string]string{"team": "web"}, want: false},
		{name: "matchLabels: a question without labels is not",
			policy: aPolicy("p", 2).selecting(selector(payments)), q: plain, want: false},
		{name: "matchExpressions In: a listed value is governed",
			policy: aPolicy("p", 2).selecting(selector(nil, expr("env", metav1.LabelSelectorOpIn, "prod", "staging"))),
			q:      plain, labels: map[string]string{"env": "staging"}, want: true},
		{name: "matchExpressions In: another value is not",
			policy: aPolicy("p", 2).selecting(selector(nil, expr("env", metav1.LabelSelectorOpIn, "prod", "staging"))),
			q:      plain, labels: map[string]string{"env": "dev"}, want: false},
		{name: "matchExpressions NotIn: a question without the label is governed",
			policy: aPolicy("p", 2).selecting(selector(nil, expr("env", metav1.LabelSelectorOpNotIn, "dev"))), q: plain, want: true},
		{name: "matchExpressions Exists: a question with the label is governed",
			policy: aPolicy("p", 2).selecting(selector(nil, expr("audited", metav1.LabelSelectorOpExists))),
			q:      plain, labels: map[string]string{"audited": ""}, want: true},
		{name: "matchExpressions DoesNotExist: a question with the label is not",
			policy: aPolicy("p", 2).selecting(selector(nil, expr("sandbox", metav1.LabelSelectorOpDoesNotExist))),
			q:      plain, labels: map[string]string{"sandbox": "true"}, want: false},
		{name: "matchLabels and matchExpressions must both match",
			policy: aPolicy("p", 2).selecting(selector(payments, expr("env", metav1.LabelSelectorOpIn, "prod"))),
			q:      plain, labels: map[string]string{"team": "payments", "env": "dev"}, want: false},
		{name: "an empty questionSelector selects every question",
			policy: aPolicy("p", 2).selecting(&metav1.LabelSelector{}), q: plain, want: true},
		{name: "a malformed questionSelector selects nothing",
			policy: aPolicy("p", 2).selecting(selector(nil, expr("env", "Near", "prod"))), q: plain, labels: map[string]string{"env": "prod"}, want: false},

		{name: "every part set and matching: governed",
			policy: aPolicy("p", 2).agents("coder").intents(hitlv1.IntentApproval).selecting(selector(payments)),
			q:      approval, labels: payments, want: true},
		{name: "every part set, the agent not matching: not governed",
			policy: aPolicy("p", 2).agents("reviewer").intents(hitlv1.IntentApproval).selecting(selector(payments)),
			q:      approval, labels: payments, want: false},
		{name: "every part set, the intent not matching: not governed",
			policy: aPolicy("p", 2).agents("coder").intents(hitlv1.IntentPlanReview).selecting(selector(payments)),
			q:      approval, labels: payments, want: false},
		{name: "every part set, the labels not matching: not governed",
			policy: aPolicy("p", 2).agents("coder").intents(hitlv1.IntentApproval).selecting(selector(payments)),
			q:      approval, labels: map[string]string{"team": "web"}, want: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.policy.obj()
			if got := p.Governs(&tc.q, tc.labels); got != tc.want {
				t.Errorf("governs = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestVoteChoice(t *testing.T) {
	answers := func(r *qrBuilder) []hitlv1.AnswerItem { return r.r.Spec.Answers }
	approvalQ := aQuestion().approval("red", "green").q
	alwaysQ := aQuestion().approval("red", "green").always("always").q
	reviewQ := aQuestion().planReview("red").q
	// both has an Approval question (color) and a PlanReview (plan).
	both := aQuestion().approval("red", "green").asks("plan", "ok", "redo").planReview("ok").q
	// mixed has a question without an intent (color) and a PlanReview (size).
	mixed := aQuestion().asks("size", "S", "M").planReview("S").q
	// multiReview is a multi-select PlanReview, whose custom text may
	// accompany the labels.
	multiReview := aQuestion().planReview("red").q
	multiReview.Spec.Questions[0].MultiSelect = true

	cases := []struct {
		name    string
		q       hitlv1.UserQuestion
		answers []hitlv1.AnswerItem
		want    hitlv1.VoteChoice
	}{
		{"a question without an intent: every batch approves", aQuestion().q, answers(aReply("r").selects("color", "blue")), hitlv1.VoteApprove},
		{"a question without an intent: even custom text approves", aQuestion().q, answers(aReply("r").custom("color", "teal")), hitlv1.VoteApprove},
		{"Approval: the approving option approves", approvalQ, answers(aReply("r").selects("color", "red")), hitlv1.VoteApprove},
		{"Approval: the rejecting option rejects", approvalQ, answers(aReply("r").selects("color", "green")), hitlv1.VoteReject},
		{"Approval: another option rejects", approvalQ, answers(aReply("r").selects("color", "blue")), hitlv1.VoteReject},
		{"Approval: the always option approves", alwaysQ, answers(aReply("r").selects("color", "always")), hitlv1.VoteApprove},
		{"Approval: no answer for it rejects", approvalQ, nil, hitlv1.VoteReject},
		{"Approval: custom text rejects", approvalQ, answers(aReply("r").custom("color", "red")), hitlv1.VoteReject},
		{"Approval: two labels reject", approvalQ, answers(aReply("r").selects("color", "red", "green")), hitlv1.VoteReject},
		{"PlanReview: the approving option approves", reviewQ, answers(aReply("r").selects("color", "red")), hitlv1.VoteApprove},
		{"PlanReview: another option rejects", reviewQ, answers(aReply("r").selects("color", "blue")), hitlv1.VoteReject},
		{"PlanReview: skipping it rejects", reviewQ, answers(aReply("r").selects("color")), hitlv1.VoteReject},
		{"PlanReview: feedback as custom text rejects", reviewQ, answers(aReply("r").custom("color", "redo step 2")), hitlv1.VoteReject},
		{"PlanReview: the approving option with feedback as custom text rejects", multiReview,
			[]hitlv1.AnswerItem{{ID: "color", Selected: []string{"red"}, Custom: "but redo step 2"}}, hitlv1.VoteReject},
		{"PlanReview: the approving option alone approves a multi-select review", multiReview,
			answers(aReply("r").selects("color", "red")), hitlv1.VoteApprove},
		{"two intents: approving both approves", both, answers(aReply("r").selects("color", "red").selects("plan", "ok")), hitlv1.VoteApprove},
		{"two intents: rejecting one rejects", both, answers(aReply("r").selects("color", "red").selects("plan", "redo")), hitlv1.VoteReject},
		{"two intents: rejecting the other rejects", both, answers(aReply("r").selects("color", "green").selects("plan", "ok")), hitlv1.VoteReject},
		{"the answer to a question without an intent does not matter beside one with an intent",
			mixed, answers(aReply("r").custom("color", "teal").selects("size", "S")), hitlv1.VoteApprove},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := choiceOf(&tc.q, tc.answers); got != tc.want {
				t.Errorf("choiceOf = %s, want %s", got, tc.want)
			}
		})
	}
}
