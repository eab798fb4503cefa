package answerer

import (
	"fmt"
	"slices"
	"strings"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
)

// Approval is what a governed question needs to settle and what it has so
// far: the rule fixed into its status.approval when it was asked, the votes
// counted (status.votes) and what is still missing. A question without
// status.approval is not governed: its first valid reply settles it, and
// ApprovalOf returns nil for it.
//
// A vote approves when it selects the approving option of every Approval
// and PlanReview question of the batch (or the always option of an
// Approval); on a question without those intents every vote approves.
type Approval struct {
	// Question is the UserQuestion's name.
	Question string
	// Rule is the question's status.approval: how many distinct approvers
	// it needs, its sets of approvers with their minimums, its veto, and
	// whether the identity that asked may vote.
	Rule *hitlv1.EffectiveApproval
	// Votes are the votes counted so far, in the order they were counted.
	Votes []hitlv1.Vote
	// Tally is status.tally: "<approving identities>/<approvals required>",
	// with " (<n> no)" when some rejected.
	Tally string
	// Approvals and Rejections count the approving and rejecting votes,
	// one per identity.
	Approvals, Rejections int
	// Needed is how many more approvals the rule needs overall; 0 once
	// Rule.Approvals identities approved.
	Needed int
	// Missing are the rule's sets of approvers whose minimum is not met
	// yet, in the rule's order.
	Missing []MissingSet
}

// MissingSet is a set of approvers that still lacks approvals.
type MissingSet struct {
	hitlv1.ApproverSet
	// Approved is how many of the set's members approved so far.
	Approved int
}

// Needed is how many more of the set's members must approve.
func (s MissingSet) Needed() int { return int(s.Minimum) - s.Approved }

// Members says who belongs to the set: "groups sre, ops; users bob".
func (s MissingSet) Members() string {
	var parts []string
	if len(s.Groups) > 0 {
		parts = append(parts, plural(len(s.Groups), "group", "groups")+" "+strings.Join(s.Groups, ", "))
	}
	if len(s.Users) > 0 {
		parts = append(parts, plural(len(s.Users), "user", "users")+" "+strings.Join(s.Users, ", "))
	}
	return strings.Join(parts, "; ")
}

// ApprovalOf is the approval view of a question, nil when the question is
// not governed (it has no status.approval).
func ApprovalOf(q *hitlv1.UserQuestion) *Approval {
	rule := q.Status.Approval
	if rule == nil {
		return nil
	}
	a := &Approval{Question: q.Name, Rule: rule, Votes: q.Status.Votes, Tally: q.Status.Tally}
	c := rule.Count(a.Votes)
	a.Approvals, a.Rejections = c.Approvals, c.Rejections
	a.Needed = max(int(rule.Approvals)-a.Approvals, 0)
	for _, s := range rule.From {
		if c.PerSet[s.Name] < int(s.Minimum) {
			a.Missing = append(a.Missing, MissingSet{ApproverSet: s, Approved: c.PerSet[s.Name]})
		}
	}
	if a.Tally == "" {
		// Written by the controller with the rule; a question read before
		// that shows the same text.
		a.Tally = rule.Tally(a.Votes)
	}
	return a
}

// Approval is the approval view of the event's question; see ApprovalOf.
func (e Event) Approval() *Approval { return ApprovalOf(e.Question) }

// VoteOf returns the vote of username, nil when it has not voted.
func (a *Approval) VoteOf(username string) *hitlv1.Vote {
	if username == "" {
		return nil
	}
	i := slices.IndexFunc(a.Votes, func(v hitlv1.Vote) bool { return v.By.Username == username })
	if i < 0 {
		return nil
	}
	return &a.Votes[i]
}

// CheckVoter returns a DUPLICATE_VOTE error when username has already
// voted: the controller would reject a second vote of the same identity,
// so a UI offers none and sends none.
func (a *Approval) CheckVoter(username string) error {
	v := a.VoteOf(username)
	if v == nil {
		return nil
	}
	return &validation.Error{Code: hitlv1.CodeDuplicateVote, Rule: fmt.Sprintf(
		"%s has already voted %s on question %s with reply %s (status.votes); each identity votes once",
		username, v.Choice, a.Question, v.Reply)}
}

// Needs says in words what the question still needs: "1 more approval",
// "1 more from prod-policy/sre (group sre)". It is empty once the rule is
// met.
func (a *Approval) Needs() []string {
	var out []string
	if a.Needed > 0 {
		out = append(out, fmt.Sprintf("%d more %s", a.Needed, plural(a.Needed, "approval", "approvals")))
	}
	for _, s := range a.Missing {
		need := fmt.Sprintf("%d more from %s", s.Needed(), s.Name)
		if m := s.Members(); m != "" {
			need += " (" + m + ")"
		}
		out = append(out, need)
	}
	return out
}

// Rules says in words how the question settles: "2 approvals; a rejection
// vetoes; the asker may not vote".
func (a *Approval) Rules() string {
	parts := []string{fmt.Sprintf("%d %s", a.Rule.Approvals, plural(int(a.Rule.Approvals), "approval", "approvals"))}
	for _, s := range a.Rule.From {
		parts = append(parts, fmt.Sprintf("at least %d from %s", s.Minimum, s.Name))
	}
	if a.Rule.Veto {
		parts = append(parts, "a rejection vetoes")
	} else {
		parts = append(parts, fmt.Sprintf("rejected once %d reject", a.Rule.Approvals))
	}
	if a.Rule.ExcludeRequester {
		parts = append(parts, "the asker may not vote")
	}
	return strings.Join(parts, "; ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
