package model

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// This file models approval policies and votes (docs/approvals.md): the
// rule fixed into a question on the controller's first look, and each
// valid reply to a governed question counted as one identity's vote.

// MaxVotes is how many votes a governed question records at most; a vote
// past it is Rejected with NOT_ANSWERABLE (not Closed: its question is
// still open).
const MaxVotes = 64

// Set is an approver set: the identities named in Users or in one of
// Groups, of whom Minimum must approve.
type Set struct {
	Name          string
	Groups, Users []string
	Minimum       int
}

// RuleSpec is a rule as written, in a policy or in an ask's
// spec.approval: Veto and ExcludeRequester default to true.
type RuleSpec struct {
	Approvals              int
	From                   []Set
	Veto, ExcludeRequester *bool
}

func (r *RuleSpec) veto() bool    { return r.Veto == nil || *r.Veto }
func (r *RuleSpec) exclude() bool { return r.ExcludeRequester == nil || *r.ExcludeRequester }

// Selector is which questions a policy governs; every part set must match.
type Selector struct {
	Agents      []string
	Intents     []hitlv1.IntentType
	MatchLabels map[string]string
}

// Policy is an ApprovalPolicy as the platform wrote it, at generation Gen.
type Policy struct {
	Name     string
	Gen      int64
	Selector Selector
	Rule     RuleSpec
}

// PolicyRef names a policy at the generation a question's rule was made
// from.
type PolicyRef struct {
	Name string
	Gen  int64
}

// Rule is a question's effective rule (status.approval): the strictest of
// the governing policies and its own spec.approval.
type Rule struct {
	Approvals              int
	From                   []Set
	Veto, ExcludeRequester bool
	Policies               []PolicyRef
}

// String is a canonical form of the rule, for comparisons.
func (r *Rule) String() string {
	if r == nil {
		return "none"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "approvals=%d veto=%v excludeRequester=%v from=[", r.Approvals, r.Veto, r.ExcludeRequester)
	for i, s := range r.From {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s:g%v:u%v:min%d", s.Name, sortedCopy(s.Groups), sortedCopy(s.Users), s.Minimum)
	}
	b.WriteString("] policies=[")
	for i, p := range r.Policies {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s@%d", p.Name, p.Gen)
	}
	b.WriteString("]")
	return b.String()
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	sort.Strings(out)
	if out == nil {
		out = []string{}
	}
	return out
}

// Vote is one counted reply on a governed question.
type Vote struct {
	Reply string
	Gen   int
	By    string
	// Approve is the vote's choice: Approve, or Reject.
	Approve bool
	// Sets are the rule's sets its author belongs to, for an approving
	// vote, sorted.
	Sets []string
}

// Candidate is a rule a question may have been given, with the index of
// the policy state it was made from.
type Candidate struct {
	State int
	Rule  *Rule
}

// governs reports whether a policy governs a question of agent, with these
// intents and labels.
func (p *Policy) governs(agent string, intents []hitlv1.IntentType, labels map[string]string) bool {
	s := &p.Selector
	if len(s.Agents) > 0 && !slices.Contains(s.Agents, agent) {
		return false
	}
	if len(s.Intents) > 0 && !slices.ContainsFunc(intents, func(i hitlv1.IntentType) bool { return slices.Contains(s.Intents, i) }) {
		return false
	}
	for k, v := range s.MatchLabels {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// ruleOf is the strictest of own and the governing policies, nil when
// there is neither.
func ruleOf(own *RuleSpec, governing []Policy) *Rule {
	if own == nil && len(governing) == 0 {
		return nil
	}
	r := &Rule{}
	merge := func(prefix string, spec *RuleSpec) {
		if spec.Approvals > r.Approvals {
			r.Approvals = spec.Approvals
		}
		r.Veto = r.Veto || spec.veto()
		r.ExcludeRequester = r.ExcludeRequester || spec.exclude()
		for _, s := range spec.From {
			s.Name = prefix + s.Name
			r.From = append(r.From, s)
		}
	}
	if own != nil {
		merge("", own)
	}
	sort.Slice(governing, func(i, j int) bool { return governing[i].Name < governing[j].Name })
	for i := range governing {
		merge(governing[i].Name+"/", &governing[i].Rule)
		if len(r.Policies) < 64 {
			r.Policies = append(r.Policies, PolicyRef{governing[i].Name, governing[i].Gen})
		}
	}
	sort.Slice(r.From, func(i, j int) bool { return r.From[i].Name < r.From[j].Name })
	return r
}

// PutPolicy creates a policy, or replaces the spec of the one of that
// name (its generation grows when the spec changes). It returns the
// policy's generation.
func (m *Model) PutPolicy(p Policy) int64 {
	was, ok := m.policies[p.Name]
	switch {
	case !ok:
		p.Gen = 1
		m.Seen["policies created"]++
	case fmt.Sprint(was.Selector, was.Rule.String()) == fmt.Sprint(p.Selector, p.Rule.String()):
		p.Gen = was.Gen
	default:
		p.Gen = was.Gen + 1
		m.Seen["policies edited"]++
	}
	m.policies[p.Name] = p
	m.snapshotPolicies()
	m.logf("policy %s at generation %d", p.Name, p.Gen)
	return p.Gen
}

func (s *RuleSpec) String() string {
	v, e := "default", "default"
	if s.Veto != nil {
		v = fmt.Sprint(*s.Veto)
	}
	if s.ExcludeRequester != nil {
		e = fmt.Sprint(*s.ExcludeRequester)
	}
	return fmt.Sprintf("%d %v %s %s", s.Approvals, s.From, v, e)
}

// DeletePolicy deletes a policy; false when there is none of that name.
func (m *Model) DeletePolicy(name string) bool {
	if _, ok := m.policies[name]; !ok {
		return false
	}
	delete(m.policies, name)
	m.snapshotPolicies()
	m.Seen["policies deleted"]++
	m.logf("policy %s deleted", name)
	return true
}

// Policy returns the named policy, if it exists.
func (m *Model) Policy(name string) (Policy, bool) {
	p, ok := m.policies[name]
	return p, ok
}

func (m *Model) snapshotPolicies() {
	var s []Policy
	for _, name := range sortedKeys(m.policies) {
		s = append(s, m.policies[name])
	}
	m.states = append(m.states, s)
}

// candidates are the rules a question asked now may be given. The
// controller reads policies from its cache on its first look: after a
// policy change it may still hold any state since the last one it was seen
// to hold (synced), but never an older one, and a manager that starts
// lists them afresh. While it is down, a question it first looks at when
// it starts gets the current state.
func (m *Model) candidates(agent string, intents []hitlv1.IntentType, labels map[string]string, own *RuleSpec) []Candidate {
	from := m.synced
	if m.down {
		from = len(m.states) - 1
	}
	var out []Candidate
	for i := from; i < len(m.states); i++ {
		var governing []Policy
		for _, p := range m.states[i] {
			if p.governs(agent, intents, labels) {
				governing = append(governing, p)
			}
		}
		out = append(out, Candidate{State: i, Rule: ruleOf(own, governing)})
	}
	return out
}

// Pending reports whether a question's rule is not known yet: it was
// asked while the controller might not have seen the latest policy
// change, and the candidates differ.
func (q *Question) Pending() bool { return len(q.Candidates) > 0 }

// FixRule records that the controller gave question name its i-th
// candidate rule: its cache held that state of the policies at least.
func (m *Model) FixRule(name string, i int) {
	q := m.Questions[name]
	c := q.Candidates[i]
	q.Rule, q.Candidates = c.Rule, nil
	if c.State > m.synced {
		m.synced = c.State
	}
	if c.State < len(m.states)-1 {
		m.Seen["asked in a policy race window: the controller had not seen the latest change"]++
	} else {
		m.Seen["asked in a policy race window: the controller had seen the latest change"]++
	}
	m.noteGoverned(q)
	m.logf("%s: rule %s (policy state %d of %d)", name, q.Rule, c.State, len(m.states)-1)
}

func (m *Model) noteGoverned(q *Question) {
	if q.Rule != nil {
		m.Seen["governed questions"]++
		if len(q.Rule.Policies) > 1 {
			m.Seen["questions governed by several policies"]++
		}
	}
}

// inSet reports whether identity by belongs to set s.
func (m *Model) inSet(s *Set, by string) bool {
	if slices.Contains(s.Users, by) { // people's usernames are their names
		return true
	}
	return slices.ContainsFunc(m.groups[by], func(g string) bool { return slices.Contains(s.Groups, g) })
}

// count tallies a rule's votes: approving and rejecting identities, and
// whether the rule is met or the question rejected.
func count(r *Rule, votes []Vote) (approvals, rejections int, met, rejected bool) {
	perSet := map[string]int{}
	for _, v := range votes {
		if v.Approve {
			approvals++
			for _, s := range v.Sets {
				perSet[s]++
			}
		} else {
			rejections++
		}
	}
	met = approvals >= r.Approvals
	for _, s := range r.From {
		if perSet[s.Name] < s.Minimum {
			met = false
		}
	}
	rejected = rejections > 0 && (r.Veto || rejections >= r.Approvals)
	return approvals, rejections, met, rejected
}

// Tally is status.tally of a question: "" when no rule governs it.
func (q *Question) Tally() string {
	if q.Rule == nil {
		return ""
	}
	a, r, _, _ := count(q.Rule, q.Votes)
	s := fmt.Sprintf("%d/%d", a, q.Rule.Approvals)
	if r > 0 {
		s += fmt.Sprintf(" (%d no)", r)
	}
	return s
}

// vote counts a valid reply on a governed question that may take one
// (Open, or Continued with nothing queued).
func (m *Model) vote(q *Question, r *Reply, approve bool) {
	switch {
	case q.Rule.ExcludeRequester && r.By == q.AskedBy:
		m.reject(r, hitlv1.CodeSelfApproval, "the requester votes; the rule excludes it")
		return
	case slices.ContainsFunc(q.Votes, func(v Vote) bool { return v.By == r.By }):
		m.reject(r, hitlv1.CodeDuplicateVote, r.By+" has voted already")
		return
	case len(q.Votes) >= MaxVotes:
		m.reject(r, hitlv1.CodeNotAnswerable, "too many votes")
		return
	}
	v := Vote{Reply: r.Name, Gen: r.Gen, By: r.By, Approve: approve}
	if approve {
		for i := range q.Rule.From {
			if m.inSet(&q.Rule.From[i], r.By) {
				v.Sets = append(v.Sets, q.Rule.From[i].Name)
			}
		}
		sort.Strings(v.Sets)
	}
	q.Votes = append(q.Votes, v)
	m.Seen["votes counted in status.votes"]++
	if !approve {
		m.Seen["rejecting votes"]++
	}
	if len(v.Sets) > 0 {
		m.Seen["approving votes in a set"]++
	}
	_, _, met, rejected := count(q.Rule, q.Votes)
	if !met && !rejected {
		r.Outcome = hitlv1.OutcomeCounted
		m.Seen["votes Counted"]++
		m.logf("reply %s: Counted on %s (%s)", r.Name, q.Name, q.Tally())
		return
	}
	how := "met the rule"
	if !met {
		how = "rejected the question"
		if q.Rule.Veto {
			how += " by veto"
		}
	}
	if q.State == hitlv1.StateContinued {
		q.Queued, q.QueuedSlot, q.QueuedGen = r.Name, m.Slots, r.Gen
		r.Outcome = hitlv1.OutcomeQueued
		m.Seen["deciding votes queued ("+how+")"]++
		m.logf("reply %s: Queued on %s, its vote %s (%s)", r.Name, q.Name, how, q.Tally())
		return
	}
	m.settleWith(q, r.Name, false)
	r.Outcome = hitlv1.OutcomeApplied
	m.Seen["deciding votes Applied ("+how+")"]++
	m.logf("reply %s: Applied, its vote %s; %s Settled (%s)", r.Name, how, q.Name, q.Tally())
}

// unvote drops the vote of a queued reply that is withdrawn or cancelled.
func (q *Question) unvote(reply string, gen int) {
	q.Votes = slices.DeleteFunc(q.Votes, func(v Vote) bool { return v.Reply == reply && v.Gen == gen })
}
