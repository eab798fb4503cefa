package main

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

const coreSet = "chaos-two-approvers/core"

// governedQuestion is q1, blocking, asked by agent-0, governed by a rule
// of two approvals, one of them from the set core (alice or bob), the
// requester excluded.
func governedQuestion(rv string) *hitlv1.UserQuestion {
	q := question(rv, 0)
	q.Spec.AskedBy = &hitlv1.UserInfo{Username: "agent-0"}
	q.Status.Approval = &hitlv1.EffectiveApproval{Approvals: 2, Veto: true, ExcludeRequester: true,
		From:     []hitlv1.ApproverSet{{Name: coreSet, Users: []string{"alice", "bob"}, Minimum: 1}},
		Policies: []hitlv1.PolicyReference{{Name: "chaos-two-approvers", Generation: 1}}}
	return q
}

func vote(reply, user string, sets ...string) hitlv1.Vote {
	return hitlv1.Vote{Reply: reply, ReplyUID: types.UID("uid-" + reply), By: hitlv1.UserInfo{Username: user},
		Choice: hitlv1.VoteApprove, Sets: sets}
}

func withVotes(q *hitlv1.UserQuestion, rv string, votes ...hitlv1.Vote) *hitlv1.UserQuestion {
	q = q.DeepCopy()
	q.ResourceVersion = rv
	q.Status.Votes = votes
	return q
}

// settledByVotes settles q with the reply's batch and the votes, the deciding
// one last.
func settledByVotes(q *hitlv1.UserQuestion, rv, reply string, answers []hitlv1.AnswerItem, votes ...hitlv1.Vote) *hitlv1.UserQuestion {
	q = settled(withVotes(q, rv, votes...), rv, reply, false, answers)
	q.Status.Settlement.ReplyUID = types.UID("uid-" + reply)
	q.Status.Settlement.Votes = votes
	return q
}

func voteReply(name, by, rv string, outcome hitlv1.ReplyOutcome, answers []hitlv1.AnswerItem) *hitlv1.QuestionReply {
	r := reply(name, rv, outcome, answers)
	r.UID = types.UID("uid-" + name)
	r.Spec.AnsweredBy = &hitlv1.UserInfo{Username: by}
	return r
}

// goodGoverned is q1 approved by alice (core, Counted) and then carol
// (Applied), with a second vote of alice refused DUPLICATE_VOTE.
func goodGoverned() history {
	q := governedQuestion("1")
	alice, carol := vote("r1", "alice", coreSet), vote("r2", "carol")
	return history{
		questions: map[string][]version[*hitlv1.UserQuestion]{"q1": {qv(0, q), qv(1, withVotes(q, "3", alice)),
			qv(2, settledByVotes(q, "6", "r2", batch("c"), alice, carol))}},
		replies: map[string][]version[*hitlv1.QuestionReply]{
			"r1": {rv(1, voteReply("r1", "alice", "2", "", batch("a"))), rv(1.1, voteReply("r1", "alice", "4", hitlv1.OutcomeCounted, batch("a")))},
			"r2": {rv(2, voteReply("r2", "carol", "5", hitlv1.OutcomeApplied, batch("c")))},
			"r3": {rv(1.5, voteReply("r3", "alice", "7", hitlv1.OutcomeRejected, batch("a2")))},
		},
		views: clientViews{
			Asks: []askView{{Question: "q1", Answers: batch("c")}},
			Replies: []replyView{{Question: "q1", Reply: "r1", Outcome: hitlv1.OutcomeCounted},
				{Question: "q1", Reply: "r2", Outcome: hitlv1.OutcomeApplied}},
		},
	}
}

func TestCheckAcceptsAGoodGovernedHistory(t *testing.T) {
	h := goodGoverned()
	h.replies["r3"][0].Object.Status.Reason = hitlv1.CodeDuplicateVote
	rep := &report{}
	h.end, h.events, h.claims = at(100), servingEvents, map[string][]version[*hitlv1.QuestionClaim]{}
	check(rep, h)
	for _, v := range rep.Violations {
		t.Errorf("%s %s: %s", v.Rule, v.Object, v.Message)
	}
	a := rep.Approvals
	if a.Governed != 1 || a.Settled != 1 || a.Votes != 2 || a.Counted != 1 || a.DuplicateVotes != 1 || a.Checked == 0 {
		t.Errorf("figures: %+v", a)
	}
}

// A question rejected by a veto needs only the rejecting vote.
func TestCheckAcceptsAVeto(t *testing.T) {
	q := governedQuestion("1")
	q.Spec.Questions = []hitlv1.Question{{ID: "go", Question: "Ship?", Options: []hitlv1.QuestionOption{{Label: "yes"}, {Label: "no"}},
		Intent: &hitlv1.QuestionIntent{Type: hitlv1.IntentApproval, Approval: &hitlv1.ApprovalIntent{Approve: "yes", Reject: "no"}}}}
	no := []hitlv1.AnswerItem{{ID: "go", Selected: []string{"no"}}}
	v := vote("r1", "carol")
	v.Choice = hitlv1.VoteReject
	h := history{
		questions: map[string][]version[*hitlv1.UserQuestion]{"q1": {qv(0, q), qv(1, settledByVotes(q, "3", "r1", no, v))}},
		replies:   map[string][]version[*hitlv1.QuestionReply]{"r1": {rv(1, voteReply("r1", "carol", "2", hitlv1.OutcomeApplied, no))}},
	}
	if got := rules(t, h); len(got) != 0 {
		t.Fatalf("violations in a vetoed question: %v", got)
	}
}

func TestCheckFindsBrokenApprovals(t *testing.T) {
	q := governedQuestion("1")
	alice, bob, carol := vote("r1", "alice", coreSet), vote("r3", "bob", coreSet), vote("r2", "carol")
	for _, tc := range []struct {
		name   string
		modify func(h *history)
		want   string
	}{
		{"settled by one approver", func(h *history) {
			h.questions["q1"][2] = qv(2, settledByVotes(q, "6", "r2", batch("c"), carol))
		}, "quorum"},
		{"one identity approved twice", func(h *history) {
			again := vote("r2", "alice", coreSet)
			h.replies["r2"] = []version[*hitlv1.QuestionReply]{rv(2, voteReply("r2", "alice", "5", hitlv1.OutcomeApplied, batch("c")))}
			h.questions["q1"][2] = qv(2, settledByVotes(q, "6", "r2", batch("c"), alice, again))
		}, "voted-twice"},
		{"one identity approved twice, as two votes", func(h *history) {
			again := vote("r2", "alice", coreSet)
			h.replies["r2"] = []version[*hitlv1.QuestionReply]{rv(2, voteReply("r2", "alice", "5", hitlv1.OutcomeApplied, batch("c")))}
			h.questions["q1"][2] = qv(2, settledByVotes(q, "6", "r2", batch("c"), alice, again))
		}, "quorum"},
		{"the requester approved", func(h *history) {
			asker := vote("r2", "agent-0")
			h.replies["r2"] = []version[*hitlv1.QuestionReply]{rv(2, voteReply("r2", "agent-0", "5", hitlv1.OutcomeApplied, batch("c")))}
			h.questions["q1"][2] = qv(2, settledByVotes(q, "6", "r2", batch("c"), alice, asker))
		}, "self-approval"},
		{"a set's minimum not met", func(h *history) {
			h.questions["q1"][2] = qv(2, settledByVotes(q, "6", "r2", batch("c"), vote("r1", "alice"), carol))
		}, "quorum"},
		{"a vote counted for a set its author is not in", func(h *history) {
			h.questions["q1"][2] = qv(2, settledByVotes(q, "6", "r2", batch("c"), alice, vote("r2", "carol", coreSet)))
		}, "vote-set-membership"},
		{"a vote whose reply was never seen", func(h *history) {
			h.questions["q1"][2] = qv(2, settledByVotes(q, "6", "r2", batch("c"), alice, bob, carol))
		}, "vote-without-reply"},
		{"a vote naming a reply by another uid", func(h *history) {
			other := alice
			other.ReplyUID = "uid-other"
			h.questions["q1"][2] = qv(2, settledByVotes(q, "6", "r2", batch("c"), other, carol))
		}, "vote-without-reply"},
		{"a vote not by its reply's stamped author", func(h *history) {
			h.questions["q1"][2] = qv(2, settledByVotes(q, "6", "r2", batch("c"), vote("r1", "bob", coreSet), carol))
		}, "vote-without-reply"},
		{"settled by a reply that is not the last vote", func(h *history) {
			h.questions["q1"][2] = qv(2, settledByVotes(q, "6", "r2", batch("c"), carol, alice))
		}, "quorum"},
		{"a Counted reply that is no vote", func(h *history) {
			h.questions["q1"][2] = qv(2, settledByVotes(q, "6", "r2", batch("c"), bob, carol))
			h.replies["r3"] = []version[*hitlv1.QuestionReply]{rv(1.5, voteReply("r3", "bob", "7", hitlv1.OutcomeCounted, batch("b")))}
		}, "counted-not-a-vote"},
		{"a Counted reply to a question no rule governs", func(h *history) {
			open := question("1", 0)
			h.questions["q1"] = []version[*hitlv1.UserQuestion]{qv(0, open), qv(2, settled(open, "6", "r2", false, batch("c")))}
		}, "counted-not-a-vote"},
		{"a Counted reply applied later", func(h *history) {
			h.replies["r1"] = append(h.replies["r1"], rv(3, voteReply("r1", "alice", "8", hitlv1.OutcomeApplied, batch("a"))))
		}, "reply-outcome-changed"},
		{"the rule changed after it was written", func(h *history) {
			weaker := withVotes(q, "3", alice)
			weaker.Status.Approval = weaker.Status.Approval.DeepCopy()
			weaker.Status.Approval.Approvals = 1
			h.questions["q1"][1] = qv(1, weaker)
		}, "approval-changed"},
		{"the rule dropped after it was written", func(h *history) {
			dropped := withVotes(q, "3", alice)
			dropped.Status.Approval = nil
			h.questions["q1"][1] = qv(1, dropped)
		}, "approval-changed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := goodGoverned()
			h.replies["r3"][0].Object.Status.Reason = hitlv1.CodeDuplicateVote
			tc.modify(&h)
			if got := rules(t, h); !slices.Contains(got, tc.want) {
				t.Fatalf("want a %s violation, got %v", tc.want, got)
			}
		})
	}
}
