package v1alpha1

import (
	"fmt"
	"maps"
	"testing"
)

func TestVoteCount(t *testing.T) {
	v := func(by string, choice VoteChoice, sets ...string) Vote {
		return Vote{Reply: "r-" + by, By: UserInfo{Username: by}, Choice: choice, Sets: sets}
	}
	approve, reject := VoteApprove, VoteReject
	rule := func(approvals int32, veto bool, sets ...ApproverSet) *EffectiveApproval {
		return &EffectiveApproval{Approvals: approvals, Veto: veto, From: sets}
	}
	set := func(name string, minimum int32) ApproverSet {
		return ApproverSet{Name: name, Groups: []string{name}, Minimum: minimum}
	}

	cases := []struct {
		name  string
		rule  *EffectiveApproval
		votes []Vote
		want  VoteCount
		text  string
	}{
		{"no votes: nothing decided", rule(2, true), nil, VoteCount{}, "0/2"},
		{"fewer approvals than required", rule(2, true), []Vote{v("bob", approve)}, VoteCount{Approvals: 1}, "1/2"},
		{"as many approvals as required: approved", rule(2, true), []Vote{v("bob", approve), v("carol", approve)},
			VoteCount{Approvals: 2, Approved: true}, "2/2"},
		{"more approvals than required: approved", rule(1, true), []Vote{v("bob", approve), v("carol", approve)},
			VoteCount{Approvals: 2, Approved: true}, "2/1"},
		{"with a veto one rejection rejects", rule(2, true), []Vote{v("bob", approve), v("carol", reject)},
			VoteCount{Approvals: 1, Rejections: 1, Rejected: true}, "1/2 (1 no)"},
		{"without a veto one rejection of two required does not", rule(2, false), []Vote{v("bob", reject)},
			VoteCount{Rejections: 1}, "0/2 (1 no)"},
		{"without a veto as many rejections as approvals required reject", rule(2, false), []Vote{v("bob", reject), v("carol", reject)},
			VoteCount{Rejections: 2, Rejected: true}, "0/2 (2 no)"},
		{"a set's minimum unmet: not approved, however many approve", rule(2, true, set("sre", 1)),
			[]Vote{v("bob", approve), v("carol", approve), v("dave", approve)}, VoteCount{Approvals: 3}, "3/2"},
		{"a set's minimum met with the approvals: approved", rule(2, true, set("sre", 1)),
			[]Vote{v("bob", approve), v("frank", approve, "sre")}, VoteCount{Approvals: 2, Approved: true}, "2/2"},
		{"a set's minimum met, not the approvals: not approved", rule(3, true, set("sre", 2)),
			[]Vote{v("frank", approve, "sre"), v("gina", approve, "sre")}, VoteCount{Approvals: 2}, "2/3"},
		{"every set's minimum must be met", rule(2, true, set("sre", 1), set("dba", 1)),
			[]Vote{v("frank", approve, "sre"), v("gina", approve, "sre")}, VoteCount{Approvals: 2}, "2/2"},
		{"one vote may count toward two sets", rule(2, true, set("sre", 1), set("dba", 1)),
			[]Vote{v("bob", approve), v("frank", approve, "dba", "sre")}, VoteCount{Approvals: 2, Approved: true}, "2/2"},
		{"a rejection counts toward no set, whatever sets it names", rule(1, false, set("sre", 1)),
			[]Vote{v("bob", approve), v("frank", reject, "sre")}, VoteCount{Approvals: 1, Rejections: 1, Rejected: true}, "1/1 (1 no)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.rule.Count(tc.votes)
			perSet := got.PerSet
			got.PerSet = nil
			if got.Approvals != tc.want.Approvals || got.Rejections != tc.want.Rejections || got.Approved != tc.want.Approved || got.Rejected != tc.want.Rejected {
				t.Errorf("Count = %+v, want %+v", got, tc.want)
			}
			if want := approvalsPerSet(tc.votes); !maps.Equal(perSet, want) {
				t.Errorf("Count's PerSet = %v, want %v", perSet, want)
			}
			if got := tc.rule.Tally(tc.votes); got != tc.text {
				t.Errorf("Tally = %q, want %q", got, tc.text)
			}
			if len(tc.text) > 16 {
				t.Errorf("tally %q is longer than status.tally's 16 characters", tc.text)
			}
		})
	}
}

// approvalsPerSet counts, independently of Count, the approving votes
// that name each set.
func approvalsPerSet(votes []Vote) map[string]int {
	m := map[string]int{}
	for _, v := range votes {
		if v.Choice != VoteApprove {
			continue
		}
		for _, s := range v.Sets {
			m[s]++
		}
	}
	return m
}

// TestVoteTallyFitsTheSchema: the longest tally status.tally may need, 64
// rejections under the most approvals a rule asks, fits its 16 characters.
func TestVoteTallyFitsTheSchema(t *testing.T) {
	var votes []Vote
	for i := range MaxVotes {
		votes = append(votes, Vote{Reply: fmt.Sprintf("r%d", i), By: UserInfo{Username: fmt.Sprintf("u%d", i)}, Choice: VoteReject})
	}
	if got := (&EffectiveApproval{Approvals: 16}).Tally(votes); len(got) > 16 || got != "0/16 (64 no)" {
		t.Errorf("tally = %q (%d characters), want %q within 16", got, len(got), "0/16 (64 no)")
	}
}
