package model_test

import (
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"time"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/test/model"
)

// Operation kinds.
const (
	kAsk         = "ask"            // a timed or blocking question
	kAskClaimed  = "ask-claimed"    // claims first, then a question whose window may have closed already
	kReply       = "reply"          // a valid batch, to any question or a missing one
	kBadReply    = "reply-bad"      // a batch that breaks the batch rules (BAD_ANSWER)
	kOutsider    = "reply-outsider" // a valid batch from a user who may not answer the agent (FORBIDDEN)
	kClaim       = "claim"          // a QuestionClaim on a question
	kRenew       = "renew"          // a claim's renewal by its holder
	kUnclaim     = "unclaim"        // a claim's deletion by its holder
	kAdmit       = "admit"          // the agent admits the queued reply
	kAdmitWrong  = "admit-wrong"    // spec.admittedReply naming a reply that is not queued
	kWithdraw    = "withdraw"       // its author deletes a queued reply
	kDeleteReply = "delete-reply"   // its author deletes a reply that is not queued
	kCancel      = "cancel"         // spec.cancelled
	kStep        = "step"           // the fake clock moves by whole slots
	kRestart     = "restart"        // the manager stops and starts again; some operations happen meanwhile
)

// The attacks of the tenancy guide, each made as the attacker with the
// roles hitl ships, never as the admin.
const (
	kForeignChange   = "foreign-change"   // another identity cancels, admits for or relabels a question (NOT_OWNER)
	kForeignWithdraw = "foreign-withdraw" // a holder or the outsider deletes someone else's reply (NOT_OWNER)
	kReuse           = "reply-reuse"      // a reply re-created under a deleted reply's name: a new reply, judged afresh
	kSelfReply       = "reply-self"       // the agent replies to its own question (SELF_APPROVAL on Approval and PlanReview)
	kOutsiderClaim   = "claim-outsider"   // the outsider claims a question (FORBIDDEN)
	kForeignClaim    = "claim-foreign"    // a holder renews or releases another holder's claim (NOT_OWNER)
)

// The changes a kForeignChange tries, and a kForeignClaim.
const (
	changeCancel  = "cancel"
	changeAdmit   = "admit"
	changeLabel   = "label"
	changeRenew   = "renew"
	changeRelease = "release"
)

// kAttack stands, in the downtime's choice, for one of the attacks that
// admission refuses.
const kAttack = "attack"

// takenLabel is the label a kForeignChange puts on a question it does not
// own.
const takenLabel = "model.hitl.dev/taken-by"

var weights = []struct {
	kind   string
	weight int
}{
	{kAsk, 12}, {kAskClaimed, 3}, {kReply, 20}, {kBadReply, 6}, {kOutsider, 3}, {kClaim, 7}, {kRenew, 5}, {kUnclaim, 5},
	{kAdmit, 8}, {kAdmitWrong, 3}, {kWithdraw, 5}, {kDeleteReply, 2}, {kCancel, 5}, {kStep, 14}, {kRestart, 3},
	// One operation in eight is an attack.
	{kForeignChange, 3}, {kForeignWithdraw, 2}, {kReuse, 3}, {kSelfReply, 3}, {kOutsiderClaim, 1}, {kForeignClaim, 2},
	// Approval policies and votes.
	{kPolicy, 3}, {kPolicyAttack, 1}, {kVote, 10}, {kDupVote, 2}, {kWrongDigest, 2},
}

// op is one operation, as generated and as the report prints it.
type op struct {
	Kind string
	// Q, R and Claim name the question, reply and claim operated on.
	Q, R, Claim string
	// By is who makes the request: the asker, the reply's author, the
	// claim's holder, or the attacker.
	By string
	// Change is what a kForeignChange or kForeignClaim tries.
	Change string
	// Ask parameters.
	Shape   int
	Timeout time.Duration // 0: blocking
	TTL     *int32
	AskedAt string // "", "now" or "stale" (ignored by the controller)
	Claims  []string
	// Reply parameters. Labelled is true when the reply names its agent,
	// as the answerer SDK's do.
	Answers  []hitlv1.AnswerItem
	Valid    bool
	Labelled bool
	// Claim parameters.
	Seconds int32
	// Slots is a clock step.
	Slots int
	// Policy is the ApprovalPolicy a kPolicy writes, with the shape
	// (policyShapes) it gives it; Own is the ask's spec.approval
	// (ownRules[Own-1]), 0 for none; Digest is the spec digest a reply
	// carries: "", digestRight or digestWrong.
	Policy      string
	PolicyShape int
	Own         int
	Digest      string
	// Want is the API server's answer the model predicts: "" (accepted),
	// or the refusal.
	Want string
	// Sub are the operations done while the manager was down.
	Sub []op
}

func (o op) String() string {
	var b strings.Builder
	b.WriteString(o.Kind)
	switch o.Kind {
	case kAsk, kAskClaimed:
		fmt.Fprintf(&b, " %s shape=%d", o.Q, o.Shape)
		if o.Timeout > 0 {
			fmt.Fprintf(&b, " timeout=%s", o.Timeout)
		} else {
			b.WriteString(" blocking")
		}
		if o.TTL != nil {
			fmt.Fprintf(&b, " ttl=%d", *o.TTL)
		}
		if o.AskedAt != "" {
			fmt.Fprintf(&b, " askedAt=%s", o.AskedAt)
		}
		if len(o.Claims) > 0 {
			fmt.Fprintf(&b, " claims=%v", o.Claims)
		}
		if o.Own > 0 {
			fmt.Fprintf(&b, " approval=%s", ownRules[o.Own-1].String())
		}
	case kReply, kBadReply, kOutsider, kSelfReply, kReuse, kVote, kDupVote, kWrongDigest:
		fmt.Fprintf(&b, " %s -> %s by %s %s", o.R, o.Q, o.By, batchString(o.Answers))
		if !o.Labelled {
			b.WriteString(" unlabelled")
		}
		if o.Digest != "" {
			fmt.Fprintf(&b, " digest=%s", o.Digest)
		}
	case kPolicy, kPolicyAttack:
		fmt.Fprintf(&b, " %s %s by %s", o.Change, o.Policy, o.By)
		if o.Change != policyDelete {
			p := policyShapes[o.PolicyShape]
			fmt.Fprintf(&b, " shape=%d selector=%v rule=%s", o.PolicyShape, p.Selector, p.Rule.String())
		}
	case kClaim, kOutsiderClaim:
		fmt.Fprintf(&b, " %s on %s by %s for %ds", o.Claim, o.Q, o.By, o.Seconds)
	case kRenew, kUnclaim:
		fmt.Fprintf(&b, " %s by %s", o.Claim, o.By)
	case kForeignClaim:
		fmt.Fprintf(&b, " %s %s by %s", o.Change, o.Claim, o.By)
	case kAdmit, kAdmitWrong:
		fmt.Fprintf(&b, " %s admits %s", o.Q, o.R)
	case kWithdraw, kDeleteReply, kForeignWithdraw:
		fmt.Fprintf(&b, " %s by %s", o.R, o.By)
	case kCancel:
		fmt.Fprintf(&b, " %s", o.Q)
	case kForeignChange:
		fmt.Fprintf(&b, " %s %s by %s", o.Change, o.Q, o.By)
		if o.Change == changeAdmit {
			fmt.Fprintf(&b, " (admits %s)", o.R)
		}
	case kStep:
		fmt.Fprintf(&b, " +%d slot(s)", o.Slots)
	case kRestart:
		b.WriteString(" [while down:")
		for _, s := range o.Sub {
			b.WriteString(" {" + s.String() + "}")
		}
		b.WriteString("]")
	}
	if o.Want != "" {
		fmt.Fprintf(&b, " (want %s)", o.Want)
	}
	return b.String()
}

func batchString(items []hitlv1.AnswerItem) string {
	var parts []string
	for _, a := range items {
		p := a.ID + "=" + strings.Join(a.Selected, "+")
		if a.Custom != "" {
			p += "/custom"
		}
		parts = append(parts, p)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// shapes are the asks the test makes: their questions, ids and options.
// The last two hold a PlanReview and an Approval intent, which the agent
// that asked may never answer; an Approval ask is blocking.
var shapes = [][]hitlv1.Question{
	{
		{ID: "env", Question: "Where?", Options: options("staging", "prod")},
		{ID: "notes", Question: "Anything else?"},
	},
	{
		{ID: "food", Question: "What for lunch?", Options: options("pizza", "sushi", "salad"), MultiSelect: true},
	},
	{
		{ID: "ok", Question: "Go ahead?", Options: options("yes", "no")},
	},
	{
		{ID: "plan", Question: "Go with this plan?", Detail: "1. build\n2. ship", Options: options("approve", "revise"),
			Intent: &hitlv1.QuestionIntent{Type: hitlv1.IntentPlanReview, PlanReview: &hitlv1.PlanReviewIntent{Approve: "approve"}}},
		{ID: "notes", Question: "Anything else?"},
	},
	{
		{ID: "perm", Question: "May I deploy?", Options: options("Allow", "Deny"),
			Intent: &hitlv1.QuestionIntent{Type: hitlv1.IntentApproval, Approval: &hitlv1.ApprovalIntent{Approve: "Allow", Reject: "Deny"}}},
	},
}

// shapeWeights make most asks plain ones.
var shapeWeights = []int{3, 3, 3, 2, 1}

// needsOtherApprover reports whether a shape holds an Approval or
// PlanReview intent, and blocking whether it must be asked without a
// timeout (an Approval).
func needsOtherApprover(shape int) bool {
	return (&hitlv1.UserQuestion{Spec: hitlv1.UserQuestionSpec{Questions: shapes[shape]}}).NeedsOtherApprover()
}

func blocking(shape int) bool {
	for _, q := range shapes[shape] {
		if q.Intent != nil && q.Intent.Type == hitlv1.IntentApproval {
			return true
		}
	}
	return false
}

func options(labels ...string) []hitlv1.QuestionOption {
	var out []hitlv1.QuestionOption
	for _, l := range labels {
		out = append(out, hitlv1.QuestionOption{Label: l})
	}
	return out
}

// validBatch answers every question of a shape following the batch rules
// of SPEC §1, skipping some but never all.
func validBatch(rng *rand.Rand, qs []hitlv1.Question) []hitlv1.AnswerItem {
	for {
		var items []hitlv1.AnswerItem
		skipped := 0
		for _, q := range qs {
			item := hitlv1.AnswerItem{ID: q.ID}
			switch {
			case q.Intent != nil && q.Intent.Type == hitlv1.IntentApproval:
				// Exactly one label, no custom text.
				item.Selected = []string{q.Options[rng.Intn(len(q.Options))].Label}
			case len(q.Options) == 0:
				if rng.Intn(10) < 7 {
					item.Custom = "free text"
				}
			case q.MultiSelect:
				for _, o := range q.Options {
					if rng.Intn(2) == 0 {
						item.Selected = append(item.Selected, o.Label)
					}
				}
				if rng.Intn(10) < 3 {
					item.Custom = "and something else"
				}
			default:
				switch rng.Intn(10) {
				case 0, 1, 2, 3, 4, 5:
					item.Selected = []string{q.Options[rng.Intn(len(q.Options))].Label}
				case 6, 7:
					item.Custom = "my own answer"
				}
			}
			if len(item.Selected) == 0 && item.Custom == "" {
				skipped++
			}
			items = append(items, item)
		}
		if skipped < len(qs) {
			return items
		}
	}
}

// badBatch breaks one batch rule of SPEC §1 in a batch that the CRD still
// admits (not empty, not all skipped, no duplicate id or label).
func badBatch(rng *rand.Rand, qs []hitlv1.Question) []hitlv1.AnswerItem {
	for {
		items := validBatch(rng, qs)
		i := rng.Intn(len(qs))
		q, item := qs[i], &items[i]
		switch rng.Intn(6) {
		case 0: // a label that is not an option
			item.Selected, item.Custom = []string{"not-an-option"}, ""
		case 1: // two labels on a single-select question
			if q.MultiSelect || len(q.Options) < 2 {
				continue
			}
			item.Selected, item.Custom = []string{q.Options[0].Label, q.Options[1].Label}, ""
		case 2: // a label and custom text on a single-select question
			if q.MultiSelect || len(q.Options) == 0 {
				continue
			}
			item.Selected, item.Custom = []string{q.Options[0].Label}, "and also this"
		case 3: // a question id missing
			if len(qs) < 2 {
				continue
			}
			rest := append(append([]hitlv1.AnswerItem{}, items[:i]...), items[i+1:]...)
			if allSkipped(rest) {
				continue
			}
			return rest
		case 4: // an id that is not a question of the ask
			items = append(items, hitlv1.AnswerItem{ID: "extra", Custom: "unasked"})
		case 5: // a label on a question without options
			if len(q.Options) > 0 {
				continue
			}
			item.Selected = []string{"yes"}
		}
		return items
	}
}

func allSkipped(items []hitlv1.AnswerItem) bool {
	for _, a := range items {
		if len(a.Selected) > 0 || a.Custom != "" {
			return false
		}
	}
	return true
}

// generator chooses operations from a seeded source and the model's
// state, so that a seed always gives the same run.
type generator struct {
	rng *rand.Rand
	m   *model.Model
	// shapeOf is each question's shape.
	shapeOf map[string]int
	// n numbers the names of new objects.
	nq, nr, nc, nmissing int
}

func (g *generator) pick(names []string) string { return names[g.rng.Intn(len(names))] }

// active are the questions that exist and are Open or Continued.
func (g *generator) active() []string {
	var out []string
	for _, name := range g.m.QuestionNames() {
		if q := g.m.Questions[name]; !q.Deleted && !terminal(q.State) {
			out = append(out, name)
		}
	}
	return out
}

// existing are the questions that exist.
func (g *generator) existing() []string {
	var out []string
	for _, name := range g.m.QuestionNames() {
		if !g.m.Questions[name].Deleted {
			out = append(out, name)
		}
	}
	return out
}

// target picks a question to reply to or claim: mostly an active one (now
// and then one with a queued reply), sometimes any question ever asked,
// and a few times one never asked.
func (g *generator) target() string {
	active, all, queued := g.active(), g.m.QuestionNames(), g.queuedReplies()
	switch r := g.rng.Float64(); {
	case r < 0.15 && len(queued) > 0:
		return g.m.Replies[g.pick(queued)].Question
	case r < 0.85 && len(active) > 0:
		return g.pick(active)
	case r < 0.97 && len(all) > 0:
		return g.pick(all)
	default:
		g.nmissing++
		return fmt.Sprintf("never-asked-%d", g.nmissing)
	}
}

// queuedReplies are the names of the replies queued on existing questions.
func (g *generator) queuedReplies() []string {
	var out []string
	for _, name := range g.existing() {
		if r := g.m.Questions[name].Queued; r != "" {
			out = append(out, r)
		}
	}
	sort.Strings(out)
	return out
}

func (g *generator) kind() string {
	total := 0
	w := make([]int, len(weights))
	for i, k := range weights {
		w[i] = k.weight
		if k.kind == kAsk && len(g.active()) > 25 {
			w[i] = 2 // enough open questions: answer them instead
		}
		total += w[i]
	}
	n := g.rng.Intn(total)
	for i, k := range weights {
		if n < w[i] {
			return k.kind
		}
		n -= w[i]
	}
	panic("unreachable")
}

// slots is a clock step: mostly one slot, so that windows are seen to
// close at the very slot of their deadline, sometimes two or three.
func (g *generator) slots() int {
	return []int{1, 1, 1, 1, 1, 2, 2, 2, 3, 3}[g.rng.Intn(10)]
}

func (g *generator) newQuestion() string { g.nq++; return fmt.Sprintf("q%04d", g.nq) }
func (g *generator) newReply() string    { g.nr++; return fmt.Sprintf("r%05d", g.nr) }
func (g *generator) newClaim() string    { g.nc++; return fmt.Sprintf("c%04d", g.nc) }

// ask chooses an ask. Most timed asks close their window one to two hours
// of fake time after they are made (the fake clock runs ahead of real
// time, so their timeout includes how far it has run); some take a plain
// timeout of one to two hours, whose window has closed at creation once the
// fake clock has run past it. An Approval ask is blocking.
func (g *generator) ask(kind string) op {
	o := op{Kind: kind, Q: g.newQuestion(), Shape: g.shape(), By: agent}
	window := time.Duration(2+g.rng.Intn(3)) * model.Slot
	switch r := g.rng.Intn(10); {
	case kind == kAskClaimed:
		o.Timeout = window
		for range 1 + g.rng.Intn(2) {
			o.Claims = append(o.Claims, g.newClaim())
		}
	case r < 6:
		o.Timeout = time.Duration(g.m.Slots)*model.Slot + window
	case r < 8:
		o.Timeout = window
	}
	if blocking(o.Shape) {
		o.Timeout = 0
	}
	if g.rng.Intn(4) == 0 {
		o.Own = 1 + g.rng.Intn(len(ownRules))
	}
	switch g.rng.Intn(10) {
	case 0, 1:
		o.TTL = ptrTo(int32(0))
	case 2, 3:
		o.TTL = ptrTo(int32(1800))
	case 4:
		o.TTL = ptrTo(int32(3600))
	}
	switch g.rng.Intn(10) {
	case 0, 1, 2:
		o.AskedAt = "now"
	case 3:
		o.AskedAt = "stale"
	}
	g.shapeOf[o.Q] = o.Shape
	return o
}

func (g *generator) shape() int {
	total := 0
	for _, w := range shapeWeights {
		total += w
	}
	n := g.rng.Intn(total)
	for i, w := range shapeWeights {
		if n < w {
			return i
		}
		n -= w
	}
	panic("unreachable")
}

// reply chooses a reply of a kind to a question: from a holder, as the
// answerer SDK sends it; from the outsider, naming its agent or not (then
// only the controller can refuse it); from the agent itself.
func (g *generator) reply(kind, question string) op {
	shape, ok := g.shapeOf[question]
	if !ok {
		shape = g.rng.Intn(len(shapes))
	}
	o := op{Kind: kind, Q: question, R: g.newReply(), By: g.pick(holders), Valid: kind != kBadReply, Labelled: true}
	switch kind {
	case kOutsider:
		o.By, o.Labelled = outsider, g.rng.Intn(2) == 0
	case kSelfReply:
		o.By, o.Valid = agent, g.rng.Intn(4) > 0
	}
	if o.Valid {
		o.Answers = validBatch(g.rng, shapes[shape])
	} else {
		o.Answers = badBatch(g.rng, shapes[shape])
	}
	return o
}

func (g *generator) claim(kind, question string) op {
	o := op{Kind: kind, Q: question, Claim: g.newClaim(), By: g.pick(holders), Seconds: int32(60 + g.rng.Intn(241))}
	if kind == kOutsiderClaim {
		o.By = outsider
	}
	return o
}

// next chooses the next operation while the manager runs; ok is false when
// the chosen kind has nothing to work on, and another is chosen.
func (g *generator) next() op {
	for {
		if o, ok := g.try(g.kind()); ok {
			return o
		}
	}
}

func (g *generator) try(kind string) (op, bool) {
	switch kind {
	case kAsk, kAskClaimed:
		return g.ask(kind), true
	case kReply, kBadReply, kOutsider:
		return g.reply(kind, g.target()), true
	case kPolicy:
		return g.policy()
	case kPolicyAttack:
		o, _ := g.policy()
		o.Kind, o.By = kPolicyAttack, g.pick([]string{agent, otherAgent, editor, outsider})
		return o, true
	case kVote, kDupVote:
		return g.vote(kind)
	case kWrongDigest:
		o := g.reply(kReply, g.target())
		o.Kind, o.Digest = kWrongDigest, digestWrong
		return o, true
	case kSelfReply:
		// Mostly a question the agent may not answer itself, or one a
		// rule governs.
		var own []string
		for _, name := range g.existing() {
			if q := g.m.Questions[name]; q.NeedsOtherApprover || q.Rule != nil {
				own = append(own, name)
			}
		}
		if len(own) > 0 && g.rng.Intn(10) < 7 {
			return g.reply(kind, g.pick(own)), true
		}
		return g.reply(kind, g.target()), true
	case kReuse:
		return g.reuse()
	case kClaim, kOutsiderClaim:
		if len(g.m.QuestionNames()) == 0 {
			return op{}, false
		}
		// Claims name questions that were asked: the controller judges a
		// claim from when it sees it for its question, and a claim of a
		// question never asked has no such time.
		active, all := g.active(), g.m.QuestionNames()
		if len(active) > 0 && g.rng.Intn(10) < 8 {
			return g.claim(kind, g.pick(active)), true
		}
		return g.claim(kind, g.pick(all)), true
	case kRenew, kUnclaim:
		claims := g.m.ClaimNames()
		if len(claims) == 0 {
			return op{}, false
		}
		c := g.pick(claims)
		return op{Kind: kind, Claim: c, By: g.m.Claims[c].Holder}, true
	case kForeignClaim:
		claims := g.m.ClaimNames()
		if len(claims) == 0 {
			return op{}, false
		}
		c := g.pick(claims)
		o := op{Kind: kind, Claim: c, By: g.pick(others(holders, g.m.Claims[c].Holder)), Change: changeRenew}
		if g.rng.Intn(2) == 0 {
			o.Change = changeRelease
		}
		return o, true
	case kAdmit:
		queued := g.queuedReplies()
		if len(queued) == 0 {
			return op{}, false
		}
		r := g.pick(queued)
		return op{Kind: kind, Q: g.m.Replies[r].Question, R: r, By: agent}, true
	case kAdmitWrong:
		existing := g.existing()
		if len(existing) == 0 {
			return op{}, false
		}
		q := g.pick(existing)
		return op{Kind: kind, Q: q, R: g.admitted(q), By: agent}, true
	case kWithdraw:
		queued := g.queuedReplies()
		if len(queued) == 0 {
			return op{}, false
		}
		r := g.pick(queued)
		return op{Kind: kind, R: r, By: g.m.Replies[r].By}, true
	case kDeleteReply:
		var candidates []string
		for _, name := range g.m.ReplyNames() {
			if r := g.m.Replies[name]; !r.Deleted && r.Outcome != hitlv1.OutcomeQueued {
				candidates = append(candidates, name)
			}
		}
		if len(candidates) == 0 {
			return op{}, false
		}
		r := g.pick(candidates)
		return op{Kind: kind, R: r, By: g.m.Replies[r].By}, true
	case kForeignWithdraw:
		// Mostly a queued reply, the one whose withdrawal matters.
		queued, live := g.queuedReplies(), g.liveReplies()
		if len(live) == 0 {
			return op{}, false
		}
		r := g.pick(live)
		if len(queued) > 0 && g.rng.Intn(2) == 0 {
			r = g.pick(queued)
		}
		return op{Kind: kind, R: r, By: g.pick(others(append([]string{outsider}, holders...), g.m.Replies[r].By))}, true
	case kCancel:
		active, existing := g.active(), g.existing()
		if len(active) > 0 && g.rng.Intn(10) < 8 {
			return op{Kind: kind, Q: g.pick(active), By: agent}, true
		}
		if len(existing) == 0 {
			return op{}, false
		}
		return op{Kind: kind, Q: g.pick(existing), By: agent}, true
	case kForeignChange:
		active, existing := g.active(), g.existing()
		if len(existing) == 0 {
			return op{}, false
		}
		q := g.pick(existing)
		if len(active) > 0 && g.rng.Intn(10) < 8 {
			q = g.pick(active)
		}
		// Mostly an identity that RBAC lets update questions, so that
		// the ownership policy is what refuses it.
		o := op{Kind: kind, Q: q, By: g.pick([]string{otherAgent, otherAgent, editor, g.pick(holders)}),
			Change: []string{changeCancel, changeAdmit, changeLabel}[g.rng.Intn(3)]}
		if o.Change == changeAdmit {
			if queued := g.m.Questions[q].Queued; queued != "" && g.rng.Intn(4) > 0 {
				o.R = queued // what the agent would admit: only ownership refuses it
			} else {
				o.R = g.admitted(q)
			}
		}
		return o, true
	case kStep:
		return op{Kind: kind, Slots: g.slots()}, true
	case kRestart:
		return op{Kind: kind}, true
	}
	panic("unknown kind " + kind)
}

// admitted chooses a name for spec.admittedReply of question q that is
// mostly not its queued reply: one of its replies (perhaps the queued one:
// then it is accepted), any reply, or none ever sent.
func (g *generator) admitted(q string) string {
	var own []string
	for _, name := range g.m.ReplyNames() {
		if g.m.Replies[name].Question == q {
			own = append(own, name)
		}
	}
	switch {
	case len(own) > 0 && g.rng.Intn(2) == 0:
		return g.pick(own)
	case len(g.m.ReplyNames()) > 0 && g.rng.Intn(2) == 0:
		return g.pick(g.m.ReplyNames())
	default:
		return "never-sent"
	}
}

// reuse re-creates a deleted reply under its name: mostly a holder's reply
// to the same question, which is judged afresh; sometimes the outsider's,
// which admission refuses when it names the agent.
func (g *generator) reuse() (op, bool) {
	var deleted []string
	for _, name := range g.m.ReplyNames() {
		if g.m.Replies[name].Deleted {
			deleted = append(deleted, name)
		}
	}
	if len(deleted) == 0 {
		return op{}, false
	}
	was := g.m.Replies[g.pick(deleted)]
	q := was.Question
	if g.rng.Intn(5) == 0 {
		q = g.target()
	}
	kind := kReply
	if g.rng.Intn(3) == 0 {
		kind = kOutsider
	}
	o := g.reply(kind, q)
	g.nr-- // no new name
	o.Kind, o.R = kReuse, was.Name
	if kind == kOutsider {
		o.Labelled = g.rng.Intn(3) > 0
	}
	return o, true
}

// liveReplies are the names of the replies that exist.
func (g *generator) liveReplies() []string {
	var out []string
	for _, name := range g.m.ReplyNames() {
		if !g.m.Replies[name].Deleted {
			out = append(out, name)
		}
	}
	return out
}

// others are the names other than not.
func others(names []string, not string) []string {
	var out []string
	for _, n := range names {
		if n != not {
			out = append(out, n)
		}
	}
	return out
}

// downtime chooses what happens while the manager is down, one operation
// at a time as the model moves: first clock steps, then claims, then asks,
// replies and the agent's updates. The manager, once back, sees all of it
// at once and decides each question's agent update before its replies, in
// creation order; so that the order of decisions cannot matter, a question
// gets either replies or one agent update while the manager is down, no
// reply is deleted before the manager has seen it, and no reply goes to a
// question whose window has closed with no claim to hold it (the reply's
// real creation time lies inside the window, which the manager, back,
// would honour). Attacks that admission refuses come among them: they
// change nothing.
type downtime struct {
	g       *generator
	phase   int
	left    int
	replied map[string]bool
	updated map[string]bool
	created map[string]bool
	// last is the question last replied to.
	last string
}

func (g *generator) downtime() *downtime {
	return &downtime{g: g, replied: map[string]bool{}, updated: map[string]bool{}, created: map[string]bool{}}
}

// next returns the next operation, or false when the manager starts again.
func (d *downtime) next() (op, bool) {
	g := d.g
	for {
		switch d.phase {
		case 0:
			d.phase++
			if g.rng.Intn(2) == 0 {
				return op{Kind: kStep, Slots: g.slots()}, true
			}
		case 1:
			d.phase, d.left = 2, g.rng.Intn(3)
		case 2:
			if d.left == 0 {
				d.phase, d.left = 3, g.rng.Intn(5)
				continue
			}
			d.left--
			kind := []string{kClaim, kRenew, kUnclaim}[g.rng.Intn(3)]
			if o, ok := g.try(kind); ok {
				return o, true
			}
		case 3:
			if d.left == 0 {
				return op{}, false
			}
			d.left--
			if o, ok := d.questionOp(); ok {
				return o, true
			}
		}
	}
}

func (d *downtime) questionOp() (op, bool) {
	g := d.g
	switch kind := []string{kAsk, kReply, kReply, kReply, kBadReply, kCancel, kAdmit, kWithdraw, kDeleteReply, kAttack}[g.rng.Intn(10)]; kind {
	case kAsk:
		return g.ask(kAsk), true
	case kReply, kBadReply:
		q := g.target()
		if d.last != "" && g.rng.Intn(2) == 0 {
			q = d.last // several replies to one question, for the manager to order
		}
		if d.updated[q] || (g.m.Overdue(q) && !g.m.HasClaims(q)) {
			return op{}, false
		}
		d.replied[q], d.last = true, q
		o := g.reply(kind, q)
		d.created[o.R] = true
		return o, true
	case kDeleteReply:
		o, ok := g.try(kind)
		if !ok || d.created[o.R] {
			return op{}, false
		}
		return o, true
	case kAttack:
		// Refused at admission, which holds while the manager is down. A
		// change of a question is predicted from the status the model
		// gives it, which the API server's matches only for questions that
		// nothing touched meanwhile.
		o, ok := g.try([]string{kForeignChange, kForeignWithdraw, kOutsiderClaim, kForeignClaim}[g.rng.Intn(4)])
		if !ok || o.Kind == kForeignChange && (d.replied[o.Q] || d.updated[o.Q]) {
			return op{}, false
		}
		return o, true
	default:
		o, ok := g.try(kind)
		if !ok || d.replied[o.Q] || d.updated[o.Q] {
			return op{}, false
		}
		if kind == kWithdraw {
			o.Q = g.m.Replies[o.R].Question
			if d.replied[o.Q] || d.updated[o.Q] {
				return op{}, false
			}
		}
		d.updated[o.Q] = true
		return o, true
	}
}

func ptrTo[T any](v T) *T { return &v }
