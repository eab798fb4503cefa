package v1alpha1

import "fmt"

// VoteCount is what a governed question's votes add up to under its rule
// (status.approval). The controller decides with it; the answerer SDK and
// the UIs show it.
// +kubebuilder:object:generate=false
type VoteCount struct {
	// Approvals and Rejections count the approving and rejecting votes,
	// one per identity.
	Approvals, Rejections int
	// PerSet counts the approvals each of the rule's sets of approvers
	// (from[].name) received; a rejection counts toward no set.
	PerSet map[string]int
	// Approved is true when the rule is met: as many approvals as it
	// requires, and each set's minimum among them.
	Approved bool
	// Rejected is true when the votes reject the question: one rejection
	// under a veto, or, without one, as many rejections as the approvals
	// required.
	Rejected bool
}

// Count adds up votes under the rule.
func (a *EffectiveApproval) Count(votes []Vote) VoteCount {
	c := VoteCount{PerSet: map[string]int{}}
	for _, v := range votes {
		switch v.Choice {
		case VoteApprove:
			c.Approvals++
			for _, s := range v.Sets {
				c.PerSet[s]++
			}
		case VoteReject:
			c.Rejections++
		}
	}
	c.Approved = c.Approvals >= int(a.Approvals)
	for _, s := range a.From {
		if c.PerSet[s.Name] < int(s.Minimum) {
			c.Approved = false
		}
	}
	c.Rejected = c.Rejections > 0 && (a.Veto || c.Rejections >= int(a.Approvals))
	return c
}

// Tally is status.tally for votes under the rule: the approving identities
// over the approvals required, and the rejections when there are some
// ("1/2 (1 no)").
func (a *EffectiveApproval) Tally(votes []Vote) string {
	c := a.Count(votes)
	s := fmt.Sprintf("%d/%d", c.Approvals, a.Approvals)
	if c.Rejections > 0 {
		s += fmt.Sprintf(" (%d no)", c.Rejections)
	}
	return s
}
