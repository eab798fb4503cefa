package agent

import (
	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// Approval is how a governed question settles: the rule fixed into it when
// it was asked, from the ApprovalPolicies that govern it and the ask's own
// Request.Approval, and the people's votes. A question no rule governs has
// none: the first valid reply settles it.
type Approval struct {
	// Rule is the question's status.approval: how many distinct people
	// must approve, the sets of approvers with their minimums, whether a
	// rejection vetoes, whether the asking identity may vote.
	Rule *hitlv1.EffectiveApproval `json:"rule"`
	// Votes are, on a settled question, the votes that decided it
	// (status.settlement.votes), the deciding one last; before, the votes
	// counted so far (status.votes). Each says who voted, Approve or
	// Reject.
	Votes []hitlv1.Vote `json:"votes"`
	// Tally is status.tally: "<approving people>/<approvals required>",
	// with " (<n> no)" when some rejected.
	Tally string `json:"tally,omitempty"`
}

// ApprovalOf is how q settles, nil when no approval rule governs it (it
// has no status.approval).
func ApprovalOf(q *hitlv1.UserQuestion) *Approval {
	if q.Status.Approval == nil {
		return nil
	}
	a := &Approval{Rule: q.Status.Approval, Votes: q.Status.Votes, Tally: q.Status.Tally}
	if s := q.Status.Settlement; s != nil && q.Status.State == hitlv1.StateSettled {
		a.Votes = s.Votes
	}
	return a
}
