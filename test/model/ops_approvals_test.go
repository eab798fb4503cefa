package model_test

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/test/model"
)

// Operations on approval policies and votes (docs/approvals.md).
const (
	kPolicy       = "policy"             // the platform creates, edits or deletes an ApprovalPolicy
	kPolicyAttack = "policy-attack"      // an agent or answerer writes an ApprovalPolicy (refused by RBAC)
	kVote         = "vote"               // a holder that has not voted yet replies to a governed question
	kDupVote      = "vote-duplicate"     // a holder that has voted replies again (DUPLICATE_VOTE)
	kWrongDigest  = "reply-wrong-digest" // a reply prepared for another spec (QUESTION_CHANGED)
)

// The changes a kPolicy makes.
const (
	policyCreate = "create"
	policyEdit   = "edit"
	policyDelete = "delete"
)

// sre is the group alice and carol are in; bob is in none.
const sre = "sre"

// groupsOf are the groups the people are in, as the API server
// authenticates them (impersonation) and admission stamps them.
var groupsOf = map[string][]string{"alice": {sre}, editor: {sre}}

// policyNames are the names the platform's policies take.
var policyNames = []string{"pa", "pb", "pc"}

func yes() *bool { return ptrTo(true) }
func no() *bool  { return ptrTo(false) }

// policyShapes are the policies the platform writes: two approvals; two
// with one from a group, or from a user; no veto on Approval and
// PlanReview questions; the agent's Approval questions; another agent's
// questions (governing none here); and by label, one approval with
// neither veto nor the requester excluded (where the agent itself may
// vote, when no other rule excludes it).
var policyShapes = []model.Policy{
	{Rule: model.RuleSpec{Approvals: 2}},
	{Rule: model.RuleSpec{Approvals: 2, From: []model.Set{{Name: "sre", Groups: []string{sre}, Minimum: 1}}}},
	{Rule: model.RuleSpec{Approvals: 2, From: []model.Set{{Name: "lead", Users: []string{"bob"}, Minimum: 1}}}},
	{Selector: model.Selector{Intents: []hitlv1.IntentType{hitlv1.IntentApproval, hitlv1.IntentPlanReview}},
		Rule: model.RuleSpec{Approvals: 2, Veto: no()}},
	{Selector: model.Selector{Agents: []string{agent}, Intents: []hitlv1.IntentType{hitlv1.IntentApproval}},
		Rule: model.RuleSpec{Approvals: 2, Veto: yes(), ExcludeRequester: yes()}},
	{Selector: model.Selector{Agents: []string{otherAgent}}, Rule: model.RuleSpec{Approvals: 2}},
	{Selector: model.Selector{MatchLabels: map[string]string{hitlv1.AgentLabel: agent}},
		Rule: model.RuleSpec{Approvals: 1, Veto: no(), ExcludeRequester: no()}},
}

var policyShapeWeights = []int{3, 3, 3, 2, 2, 1, 2}

// ownRules are the rules an agent asks for in spec.approval. Each is at
// least as strict as every policy shape (at least two approvals, a set of
// group sre and one of user bob, veto and the requester excluded by
// default), so admission never refuses them as POLICY_WEAKENED, whichever
// policies its cache holds when it looks.
var ownRules = []model.RuleSpec{
	{Approvals: 2, From: []model.Set{{Name: "sre", Groups: []string{sre}, Minimum: 1}, {Name: "lead", Users: []string{"bob"}, Minimum: 1}}},
	{Approvals: 3, From: []model.Set{{Name: "sre", Groups: []string{sre}, Minimum: 2}, {Name: "lead", Users: []string{"bob"}, Minimum: 1}}},
}

func ruleSpec(r *model.RuleSpec) hitlv1.ApprovalRule {
	out := hitlv1.ApprovalRule{Approvals: int32(r.Approvals), Veto: r.Veto, ExcludeRequester: r.ExcludeRequester}
	for _, s := range r.From {
		out.From = append(out.From, hitlv1.ApproverSet{Name: s.Name, Groups: s.Groups, Users: s.Users, Minimum: int32(s.Minimum)})
	}
	return out
}

func policySpec(p *model.Policy) hitlv1.ApprovalPolicySpec {
	spec := hitlv1.ApprovalPolicySpec{Rule: ruleSpec(&p.Rule)}
	spec.Selector.Agents = p.Selector.Agents
	spec.Selector.Intents = p.Selector.Intents
	if p.Selector.MatchLabels != nil {
		spec.Selector.QuestionSelector = &metav1.LabelSelector{MatchLabels: p.Selector.MatchLabels}
	}
	return spec
}

// intentsOf are the intents of a shape's questions.
func intentsOf(shape int) []hitlv1.IntentType {
	var out []hitlv1.IntentType
	for _, q := range shapes[shape] {
		if q.Intent != nil && !slices.Contains(out, q.Intent.Type) {
			out = append(out, q.Intent.Type)
		}
	}
	return out
}

// approves reports whether a batch approves as a vote: it selects, and
// only selects, the approving option of every Approval and PlanReview
// question of the shape.
func approves(shape int, answers []hitlv1.AnswerItem) bool {
	for _, q := range shapes[shape] {
		if q.Intent == nil {
			continue
		}
		approve := ""
		switch {
		case q.Intent.Approval != nil:
			approve = q.Intent.Approval.Approve
		case q.Intent.PlanReview != nil:
			approve = q.Intent.PlanReview.Approve
		}
		i := slices.IndexFunc(answers, func(a hitlv1.AnswerItem) bool { return a.ID == q.ID })
		if i < 0 || answers[i].Custom != "" || !slices.Equal(answers[i].Selected, []string{approve}) {
			return false
		}
	}
	return true
}

// voteBatch is a valid batch that approves or rejects.
func (g *generator) voteBatch(shape int, approve bool) []hitlv1.AnswerItem {
	items := validBatch(g.rng, shapes[shape])
	for i, q := range shapes[shape] {
		if q.Intent == nil {
			continue
		}
		items[i].Custom = ""
		switch {
		case approve && q.Intent.Approval != nil:
			items[i].Selected = []string{q.Intent.Approval.Approve}
		case approve && q.Intent.PlanReview != nil:
			items[i].Selected = []string{q.Intent.PlanReview.Approve}
		case q.Intent.Approval != nil:
			items[i].Selected = []string{q.Intent.Approval.Reject}
		default:
			items[i].Selected = []string{"revise"}
		}
	}
	return items
}

// governed are the questions that exist and have a rule, and active
// those among them that are Open or Continued.
func (g *generator) governed(activeOnly bool) []string {
	var out []string
	for _, name := range g.existing() {
		q := g.m.Questions[name]
		if q.Rule != nil && (!activeOnly || !terminal(q.State)) {
			out = append(out, name)
		}
	}
	return out
}

func (g *generator) policy() (op, bool) {
	name := g.pick(policyNames)
	o := op{Kind: kPolicy, Policy: name, By: platform, PolicyShape: pickWeighted(g, policyShapeWeights)}
	was, exists := g.m.Policy(name)
	switch {
	case !exists:
		o.Change = policyCreate
	case g.rng.Intn(2) == 0:
		o.Change = policyDelete
	default:
		o.Change = policyEdit
		for policyShapes[o.PolicyShape].Rule.String() == was.Rule.String() && sameSelector(policyShapes[o.PolicyShape].Selector, was.Selector) {
			o.PolicyShape = pickWeighted(g, policyShapeWeights)
		}
	}
	return o, true
}

func sameSelector(a, b model.Selector) bool {
	return slices.Equal(a.Agents, b.Agents) && slices.Equal(a.Intents, b.Intents) && len(a.MatchLabels) == len(b.MatchLabels)
}

func pickWeighted(g *generator, weights []int) int {
	total := 0
	for _, w := range weights {
		total += w
	}
	n := g.rng.Intn(total)
	for i, w := range weights {
		if n < w {
			return i
		}
		n -= w
	}
	panic("unreachable")
}

// vote chooses a vote on a governed active question: from a holder that
// has not voted yet (kVote) or one that has (kDupVote), approving mostly.
// Some carry the question's spec digest, as the answerer SDK sends it.
func (g *generator) vote(kind string) (op, bool) {
	governed := g.governed(true)
	if len(governed) == 0 {
		return op{}, false
	}
	q := g.m.Questions[g.pick(governed)]
	var voted, fresh []string
	for _, h := range append([]string{agent}, holders...) {
		if slices.ContainsFunc(q.Votes, func(v model.Vote) bool { return v.By == h }) {
			voted = append(voted, h)
		} else if h != agent {
			fresh = append(fresh, h)
		}
	}
	by := ""
	switch {
	case kind == kDupVote && len(voted) > 0:
		by = g.pick(voted)
	case kind == kVote && len(fresh) > 0:
		by = g.pick(fresh)
	default:
		return op{}, false
	}
	shape := g.shapeOf[q.Name]
	o := op{Kind: kind, Q: q.Name, R: g.newReply(), By: by, Valid: true, Labelled: true,
		Answers: g.voteBatch(shape, g.rng.Intn(10) < 7)}
	if g.rng.Intn(2) == 0 {
		o.Digest = digestRight
	}
	return o, true
}

// Digests a reply carries in spec.questionRef.specDigest.
const (
	digestRight = "right"
	digestWrong = "wrong"
)

// wrongDigest is a digest no question here has.
const wrongDigest = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
