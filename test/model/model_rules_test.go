package model

import (
	"fmt"
	"testing"
	"time"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// These scenarios pin the model itself to SPEC §1, so that a wrong model
// fails here, next to the rule it breaks, rather than as a mismatch with
// the controller.

var t0 = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

// The namespace of these scenarios: bot asks; alice and bob answer, and so
// does bot itself (a grant bound by mistake); mallory may not.
const bot, alice, bob, mallory = "bot", "alice", "bob", "mallory"

func newModel() *Model {
	return New(t0, Tenancy{Agent: bot, Answerers: []string{alice, bob, bot}})
}

// reply is alice's reply, as the answerer SDK sends it.
func reply(t *testing.T, m *Model, name, question string, valid bool) {
	t.Helper()
	if _, err := m.Reply(Sent{Name: name, Question: question, By: alice, Valid: valid, Labelled: true}); err != nil {
		t.Fatalf("reply %s: %v", name, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func timed(m *Model, name string, timeout time.Duration) *Question {
	created := t0.Add(3 * time.Second) // a few seconds of real time after T0
	return m.Ask(Ask{Name: name, Created: created, Timeout: &timeout})
}

func expectState(t *testing.T, m *Model, name string, want hitlv1.QuestionState) {
	t.Helper()
	if got := m.Questions[name].State; got != want {
		t.Fatalf("%s is %s, want %s\n%v", name, got, want, m.Log)
	}
}

func expectOutcome(t *testing.T, m *Model, name string, outcome hitlv1.ReplyOutcome, reason hitlv1.ErrorCode) {
	t.Helper()
	if r := m.Replies[name]; r.Outcome != outcome || r.Reason != reason {
		t.Fatalf("%s is %s/%s, want %s/%s\n%v", name, r.Outcome, r.Reason, outcome, reason, m.Log)
	}
}

func TestWindowCloses(t *testing.T) {
	m := newModel()
	q := timed(m, "q", time.Hour)
	if q.DeadlineSlot != 3 {
		t.Fatalf("deadline slot %d, want 3: T0+3s+1h lies in the third slot", q.DeadlineSlot)
	}
	m.Step(2)
	expectState(t, m, "q", hitlv1.StateOpen)
	m.Step(1)
	expectState(t, m, "q", hitlv1.StateContinued)
	if q.ContinuedSlot != 3 {
		t.Fatalf("continued at slot %d", q.ContinuedSlot)
	}

	blocking := m.Ask(Ask{Name: "b", Created: t0.Add(time.Second)})
	m.Step(100)
	if blocking.State != hitlv1.StateOpen {
		t.Fatal("a blocking question never times out")
	}
}

func TestLateReplyQueuesAndIsAdmitted(t *testing.T) {
	m := newModel()
	timed(m, "q", time.Hour)
	m.Step(3)
	reply(t, m, "r1", "q", false)
	expectOutcome(t, m, "r1", hitlv1.OutcomeRejected, hitlv1.CodeBadAnswer)
	reply(t, m, "r2", "q", true)
	expectOutcome(t, m, "r2", hitlv1.OutcomeQueued, "")
	reply(t, m, "r3", "q", false)
	expectOutcome(t, m, "r3", hitlv1.OutcomeRejected, hitlv1.CodeReplyQueued)
	if err := m.Admit("q", "r3", bot); err != ErrInvalid {
		t.Fatalf("admitting a reply that is not queued: %v", err)
	}
	if err := m.Admit("q", "r2", bot); err != nil {
		t.Fatal(err)
	}
	expectState(t, m, "q", hitlv1.StateSettled)
	expectOutcome(t, m, "r2", hitlv1.OutcomeAdmitted, "")
	if s := m.Questions["q"].Settlement; s.Reply != "r2" || !s.Late {
		t.Fatalf("settlement %+v", s)
	}
	if err := m.Admit("q", "r2", bot); err != nil {
		t.Fatal("setting the same admittedReply again is no change")
	}
	must(t, m.DeleteReply("r2", alice))
	expectState(t, m, "q", hitlv1.StateSettled)
	reply(t, m, "r4", "q", true)
	expectOutcome(t, m, "r4", hitlv1.OutcomeClosed, hitlv1.CodeNotAnswerable)
}

func TestWithdrawnReplyLeavesTheQuestionAnswerable(t *testing.T) {
	m := newModel()
	timed(m, "q", time.Hour)
	m.Step(3)
	reply(t, m, "r1", "q", true)
	must(t, m.DeleteReply("r1", alice))
	if m.Questions["q"].Queued != "" {
		t.Fatal("the withdrawn reply is still queued")
	}
	reply(t, m, "r2", "q", true)
	expectOutcome(t, m, "r2", hitlv1.OutcomeQueued, "")
	if err := m.Cancel("q", bot); err != nil {
		t.Fatal(err)
	}
	expectState(t, m, "q", hitlv1.StateCancelled)
	expectOutcome(t, m, "r2", hitlv1.OutcomeClosed, hitlv1.CodeNotAnswerable)
	expectOutcome(t, m, "r1", hitlv1.OutcomeQueued, "")
}

func TestClaimsHoldTheWindow(t *testing.T) {
	m := newModel()
	m.Step(4)
	must(t, m.Claim("c1", "q", "alice"))
	q := timed(m, "q", time.Hour) // deadline slot 3: already past
	expectState(t, m, "q", hitlv1.StateOpen)
	if got := m.ListedClaims("q"); len(got) != 1 || got[0].Holder != "alice" {
		t.Fatalf("listed %v", got)
	}
	must(t, m.Unclaim("c1", alice))
	expectState(t, m, "q", hitlv1.StateContinued)
	if q.ContinuedSlot != 4 {
		t.Fatalf("continued at slot %d, want 4: at once", q.ContinuedSlot)
	}

	timed(m, "p", time.Hour)
	must(t, m.Claim("c2", "p", "bob"))
	m.Step(1)
	if len(m.ListedClaims("p")) != 0 {
		t.Fatal("a claim outlived a clock step")
	}
	must(t, m.Renew("c2", bob))
	if len(m.ListedClaims("p")) != 1 {
		t.Fatal("a renewal did not make the claim live")
	}
}

func TestRestartRenewsClaimsAndDecidesWhatCameDue(t *testing.T) {
	m := newModel()
	timed(m, "held", time.Hour)
	timed(m, "free", time.Hour)
	must(t, m.Claim("c1", "held", "alice"))
	m.Stop()
	m.Step(5)
	expectState(t, m, "free", hitlv1.StateOpen) // nobody decides while down
	m.Start()
	expectState(t, m, "free", hitlv1.StateContinued)
	expectState(t, m, "held", hitlv1.StateOpen)
	if q := m.Questions["free"]; q.ContinuedSlot != 5 {
		t.Fatalf("continued at slot %d", q.ContinuedSlot)
	}
}

func TestTTL(t *testing.T) {
	m := newModel()
	zero, half := int32(0), int32(1800)
	m.Ask(Ask{Name: "now", Created: t0.Add(time.Second), TTL: &zero})
	m.Ask(Ask{Name: "later", Created: t0.Add(time.Second), TTL: &half})
	reply(t, m, "r1", "now", true)
	expectOutcome(t, m, "r1", hitlv1.OutcomeApplied, "")
	if !m.Questions["now"].Deleted || !m.Replies["r1"].Deleted {
		t.Fatal("TTL 0 deletes the question and its replies once settled")
	}
	must(t, m.Claim("c1", "later", "alice"))
	if err := m.Cancel("later", bot); err != nil {
		t.Fatal(err)
	}
	reply(t, m, "r2", "later", true)
	expectOutcome(t, m, "r2", hitlv1.OutcomeClosed, hitlv1.CodeNotAnswerable)
	if m.Questions["later"].Deleted {
		t.Fatal("deleted before its TTL")
	}
	m.Step(1)
	if !m.Questions["later"].Deleted || !m.Replies["r2"].Deleted || m.Claims["c1"] != nil {
		t.Fatal("TTL 1800 s deletes the question, its replies and its claims at the next step")
	}
	reply(t, m, "r3", "later", true)
	expectOutcome(t, m, "r3", hitlv1.OutcomeClosed, hitlv1.CodeNotAnswerable)
	if err := m.Cancel("later", bot); err != ErrNotFound {
		t.Fatal("a deleted question is not found")
	}
}

func TestWindowStart(t *testing.T) {
	created := t0
	inside := created.Add(400 * time.Millisecond)
	outside := created.Add(-time.Millisecond)
	if !WindowStart(created, &inside).Equal(inside) {
		t.Fatal("askedAt within the creation second is the window start")
	}
	if !WindowStart(created, &outside).Equal(created) {
		t.Fatal("askedAt outside the creation second is ignored")
	}
	late := created.Add(time.Second)
	if !WindowStart(created, &late).Equal(created) {
		t.Fatal("askedAt a full second after creation is ignored")
	}
}

// A queued reply admitted, or closed by a cancel, while the manager is
// down and deleted before it starts again goes with the outcome its object
// showed: the manager never saw it to write the new one. The question still
// settles (or is cancelled) as if the reply had stayed.
func TestAReplyDeletedWhileTheManagerIsDownKeepsTheOutcomeItShowed(t *testing.T) {
	m := newModel()
	timed(m, "q", time.Hour)
	timed(m, "c", time.Hour)
	m.Step(3)
	reply(t, m, "r1", "q", true)
	reply(t, m, "r2", "c", true)
	m.Stop()
	if err := m.Admit("q", "r1", bot); err != nil {
		t.Fatal(err)
	}
	if err := m.Cancel("c", bot); err != nil {
		t.Fatal(err)
	}
	must(t, m.DeleteReply("r1", alice))
	must(t, m.DeleteReply("r2", alice))
	m.Start()
	expectOutcome(t, m, "r1", hitlv1.OutcomeQueued, "")
	expectOutcome(t, m, "r2", hitlv1.OutcomeQueued, "")
	expectState(t, m, "q", hitlv1.StateSettled)
	expectState(t, m, "c", hitlv1.StateCancelled)

	// Once the manager runs, a deletion after admission changes nothing.
	timed(m, "q2", time.Hour)
	m.Step(3)
	reply(t, m, "r3", "q2", true)
	if err := m.Admit("q2", "r3", bot); err != nil {
		t.Fatal(err)
	}
	must(t, m.DeleteReply("r3", alice))
	expectOutcome(t, m, "r3", hitlv1.OutcomeAdmitted, "")
}

// The tenancy guide's attacks, each refused with its code and changing
// nothing.

func TestOnlyTheAskerChangesItsQuestion(t *testing.T) {
	m := newModel()
	timed(m, "q", time.Hour)
	m.Step(3)
	reply(t, m, "r1", "q", true)
	for _, err := range []error{m.Cancel("q", alice), m.Relabel("q", "builder"), m.Admit("q", "r1", "builder")} {
		if err != ErrNotOwner {
			t.Fatalf("a change by another identity: %v, want NOT_OWNER", err)
		}
	}
	if err := m.Admit("q", "never-sent", "builder"); err != ErrInvalid {
		t.Fatalf("naming a reply that is not queued: %v, want the CRD's refusal, checked first", err)
	}
	expectState(t, m, "q", hitlv1.StateContinued)
	expectOutcome(t, m, "r1", hitlv1.OutcomeQueued, "")
	if q := m.Questions["q"]; q.Cancelled || q.Admitted != "" {
		t.Fatalf("the refused changes changed the spec: %+v", q)
	}
	must(t, m.Relabel("q", bot))
	must(t, m.Admit("q", "r1", bot))
	expectState(t, m, "q", hitlv1.StateSettled)
	if err := m.Cancel("gone", bot); err != ErrNotFound {
		t.Fatalf("cancelling a missing question: %v", err)
	}
}

func TestOnlyTheAuthorOrTheAgentWithdrawsAReply(t *testing.T) {
	m := newModel()
	timed(m, "q", time.Hour)
	m.Step(3)
	reply(t, m, "r1", "q", true)
	for _, by := range []string{bob, mallory} {
		if err := m.DeleteReply("r1", by); err != ErrNotOwner {
			t.Fatalf("%s withdrawing alice's reply: %v, want NOT_OWNER", by, err)
		}
	}
	if m.Questions["q"].Queued != "r1" || m.Replies["r1"].Deleted {
		t.Fatal("a refused withdrawal withdrew the reply")
	}
	must(t, m.DeleteReply("r1", bot))
	if m.Questions["q"].Queued != "" {
		t.Fatal("the agent's withdrawal left the reply queued")
	}
	if err := m.DeleteReply("r1", alice); err != ErrNotFound {
		t.Fatalf("deleting a deleted reply: %v", err)
	}
}

func TestAReplyReCreatedUnderADeletedNameIsJudgedAfresh(t *testing.T) {
	m := newModel()
	m.Ask(Ask{Name: "q", Created: t0.Add(time.Second)})
	reply(t, m, "r1", "q", true)
	must(t, m.DeleteReply("r1", alice))
	if _, err := m.Reply(Sent{Name: "r1", Question: "q", By: bob, Valid: true, Labelled: true}); err != nil {
		t.Fatal(err)
	}
	expectOutcome(t, m, "r1", hitlv1.OutcomeClosed, hitlv1.CodeNotAnswerable)
	if s := m.Questions["q"].Settlement; s.Reply != "r1" || s.Gen != 1 || m.Replies["r1"].Gen != 2 {
		t.Fatalf("the settlement follows the first r1: %+v, reply gen %d", s, m.Replies["r1"].Gen)
	}

	timed(m, "p", time.Hour)
	m.Step(3)
	reply(t, m, "r2", "p", true)
	must(t, m.DeleteReply("r2", alice))
	reply(t, m, "r2", "p", true)
	expectOutcome(t, m, "r2", hitlv1.OutcomeQueued, "")
	if q := m.Questions["p"]; q.Queued != "r2" || q.QueuedGen != 2 {
		t.Fatalf("queued %s gen %d, want the second r2", q.Queued, q.QueuedGen)
	}
	must(t, m.DeleteReply("r2", alice))

	// The outsider: refused at admission when the reply names its agent,
	// FORBIDDEN by the controller when it does not.
	if _, err := m.Reply(Sent{Name: "r2", Question: "p", By: mallory, Valid: true, Labelled: true}); err != ErrForbidden {
		t.Fatalf("the outsider's labelled reply: %v, want FORBIDDEN at admission", err)
	}
	if !m.Replies["r2"].Deleted {
		t.Fatal("a refused reply was recorded")
	}
	if _, err := m.Reply(Sent{Name: "r2", Question: "p", By: mallory, Valid: true}); err != nil {
		t.Fatal(err)
	}
	expectOutcome(t, m, "r2", hitlv1.OutcomeRejected, hitlv1.CodeForbidden)
	expectState(t, m, "p", hitlv1.StateContinued)
	if m.Questions["p"].Queued != "" {
		t.Fatal("the outsider's reply was queued")
	}
}

func TestTheAskerNeverAnswersItsOwnApproval(t *testing.T) {
	m := newModel()
	m.Ask(Ask{Name: "approve", Created: t0.Add(time.Second), NeedsOtherApprover: true})
	m.Ask(Ask{Name: "plain", Created: t0.Add(time.Second)})
	for _, name := range []string{"s1", "s2"} {
		if _, err := m.Reply(Sent{Name: name, Question: "approve", By: bot, Valid: name == "s1", Labelled: true}); err != nil {
			t.Fatal(err)
		}
		expectOutcome(t, m, name, hitlv1.OutcomeRejected, hitlv1.CodeSelfApproval)
	}
	expectState(t, m, "approve", hitlv1.StateOpen)
	if _, err := m.Reply(Sent{Name: "s3", Question: "plain", By: bot, Valid: true, Labelled: true}); err != nil {
		t.Fatal(err)
	}
	expectOutcome(t, m, "s3", hitlv1.OutcomeApplied, "")

	// Judged before the question's state: settled, it is still SELF_APPROVAL.
	reply(t, m, "r1", "approve", true)
	expectState(t, m, "approve", hitlv1.StateSettled)
	if _, err := m.Reply(Sent{Name: "s4", Question: "approve", By: bot, Valid: true, Labelled: true}); err != nil {
		t.Fatal(err)
	}
	expectOutcome(t, m, "s4", hitlv1.OutcomeRejected, hitlv1.CodeSelfApproval)
}

func TestOnlyAnswerersClaimAndOnlyTheHolderRenewsOrReleases(t *testing.T) {
	m := newModel()
	timed(m, "q", time.Hour)
	if err := m.Claim("c1", "q", mallory); err != ErrForbidden {
		t.Fatalf("the outsider's claim: %v, want FORBIDDEN", err)
	}
	if m.Claims["c1"] != nil {
		t.Fatal("a refused claim was recorded")
	}
	must(t, m.Claim("c2", "q", alice))
	m.Step(3)
	expectState(t, m, "q", hitlv1.StateContinued) // c2 expired at the step
	if err := m.Renew("c2", bob); err != ErrNotOwner {
		t.Fatalf("bob renewing alice's claim: %v, want NOT_OWNER", err)
	}
	if err := m.Unclaim("c2", bob); err != ErrNotOwner {
		t.Fatalf("bob releasing alice's claim: %v, want NOT_OWNER", err)
	}
	if c := m.Claims["c2"]; c == nil || c.Live {
		t.Fatalf("the refused renewal changed the claim: %+v", c)
	}
	if err := m.Renew("c3", alice); err != ErrNotFound {
		t.Fatalf("renewing a missing claim: %v", err)
	}
}

// Votes (docs/approvals.md): a namespace where carol is in group sre.
func newVotingModel() *Model {
	return New(t0, Tenancy{Agent: bot, Answerers: []string{alice, bob, "carol", bot}, Groups: map[string][]string{"carol": {"sre"}}})
}

func vote(t *testing.T, m *Model, name, question, by string, approve bool) {
	t.Helper()
	if _, err := m.Reply(Sent{Name: name, Question: question, By: by, Valid: true, Labelled: true, Approves: approve}); err != nil {
		t.Fatalf("reply %s: %v", name, err)
	}
}

func TestTwoApprovalsFromSRESettle(t *testing.T) {
	m := newVotingModel()
	m.PutPolicy(Policy{Name: "p", Rule: RuleSpec{Approvals: 2, From: []Set{{Name: "sre", Groups: []string{"sre"}, Minimum: 1}}}})
	q := m.Ask(Ask{Name: "q", Created: t0.Add(time.Second)})
	seenLatest(m, "q")
	if got := q.Rule.String(); got != "approvals=2 veto=true excludeRequester=true from=[p/sre:g[sre]:u[]:min1] policies=[p@1]" {
		t.Fatalf("rule %s", got)
	}
	vote(t, m, "a", "q", alice, true)
	vote(t, m, "a2", "q", alice, true)
	vote(t, m, "self", "q", bot, true)
	vote(t, m, "b", "q", bob, true)
	expectOutcome(t, m, "a", hitlv1.OutcomeCounted, "")
	expectOutcome(t, m, "a2", hitlv1.OutcomeRejected, hitlv1.CodeDuplicateVote)
	expectOutcome(t, m, "self", hitlv1.OutcomeRejected, hitlv1.CodeSelfApproval)
	expectOutcome(t, m, "b", hitlv1.OutcomeCounted, "")
	if q.Tally() != "2/2" || q.State != hitlv1.StateOpen {
		t.Fatalf("tally %s, state %s: the set's minimum is missing", q.Tally(), q.State)
	}
	vote(t, m, "c", "q", "carol", true)
	expectOutcome(t, m, "c", hitlv1.OutcomeApplied, "")
	if q.State != hitlv1.StateSettled || len(q.Settlement.Votes) != 3 || q.Settlement.Votes[2].Sets[0] != "p/sre" {
		t.Fatalf("%s %+v", q.State, q.Settlement)
	}
}

func TestVetoAndRejectionsWithoutVeto(t *testing.T) {
	m := newVotingModel()
	m.PutPolicy(Policy{Name: "p", Rule: RuleSpec{Approvals: 2}})
	m.Ask(Ask{Name: "veto", Created: t0.Add(time.Second)})
	seenLatest(m, "veto")
	vote(t, m, "a", "veto", alice, false)
	expectOutcome(t, m, "a", hitlv1.OutcomeApplied, "")
	expectState(t, m, "veto", hitlv1.StateSettled)

	m.PutPolicy(Policy{Name: "p", Rule: RuleSpec{Approvals: 2, Veto: ptrFalse()}})
	q := m.Ask(Ask{Name: "noveto", Created: t0.Add(time.Second)})
	seenLatest(m, "noveto")
	vote(t, m, "b", "noveto", alice, false)
	expectOutcome(t, m, "b", hitlv1.OutcomeCounted, "")
	if q.Tally() != "0/2 (1 no)" {
		t.Fatalf("tally %s", q.Tally())
	}
	vote(t, m, "c", "noveto", bob, false)
	expectOutcome(t, m, "c", hitlv1.OutcomeApplied, "")
	if m.Questions["veto"].Rule.Policies[0].Gen != 1 || q.Rule.Policies[0].Gen != 2 {
		t.Fatal("a policy's edit reaches only the questions asked after it")
	}
}

func TestDecidingVoteQueuedWithdrawnAndCancelled(t *testing.T) {
	m := newVotingModel()
	m.PutPolicy(Policy{Name: "p", Rule: RuleSpec{Approvals: 2}})
	q := timed(m, "q", time.Hour)
	seenLatest(m, "q")
	vote(t, m, "a", "q", alice, true)
	m.Step(3)
	expectState(t, m, "q", hitlv1.StateContinued)
	vote(t, m, "b", "q", bob, true)
	expectOutcome(t, m, "b", hitlv1.OutcomeQueued, "")
	vote(t, m, "c", "q", "carol", true)
	expectOutcome(t, m, "c", hitlv1.OutcomeRejected, hitlv1.CodeReplyQueued)
	must(t, m.DeleteReply("b", bob))
	if q.Tally() != "1/2" {
		t.Fatalf("tally %s after the withdrawal", q.Tally())
	}
	vote(t, m, "b2", "q", bob, true)
	expectOutcome(t, m, "b2", hitlv1.OutcomeQueued, "")
	must(t, m.Cancel("q", bot))
	expectOutcome(t, m, "b2", hitlv1.OutcomeClosed, hitlv1.CodeNotAnswerable)
	if q.Tally() != "1/2" || len(q.Votes) != 1 {
		t.Fatalf("tally %s, votes %v after the cancellation", q.Tally(), q.Votes)
	}
}

func ptrFalse() *bool { b := false; return &b }

// seenLatest records that the controller saw the latest policies when it
// first looked at a question asked in a race window.
func seenLatest(m *Model, name string) {
	if q := m.Questions[name]; q.Pending() {
		m.FixRule(name, len(q.Candidates)-1)
	}
}

func TestAPolicyRaceLeavesEitherRule(t *testing.T) {
	m := newVotingModel()
	m.PutPolicy(Policy{Name: "p", Rule: RuleSpec{Approvals: 2}})
	q := m.Ask(Ask{Name: "q", Created: t0.Add(time.Second)})
	if !q.Pending() || len(q.Candidates) != 2 || q.Candidates[0].Rule != nil {
		t.Fatalf("candidates %v: the controller may not have seen the policy yet", q.Candidates)
	}
	m.FixRule("q", 1)
	if r := m.Ask(Ask{Name: "r", Created: t0.Add(time.Second)}); r.Pending() || r.Rule == nil {
		t.Fatal("a question asked after one that saw the policy sees it too")
	}
}

// A reply whose question is finished or gone is Closed, NOT_ANSWERABLE:
// final and healthy. A vote past the MaxVotes a governed question records
// is still Rejected, NOT_ANSWERABLE: its question is open.
func TestClosedForAFinishedOrGoneQuestionRejectedPastMaxVotes(t *testing.T) {
	m := newModel()
	reply(t, m, "orphan", "never-asked", true)
	expectOutcome(t, m, "orphan", hitlv1.OutcomeClosed, hitlv1.CodeNotAnswerable)
	m.Ask(Ask{Name: "c", Created: t0.Add(time.Second)})
	must(t, m.Cancel("c", bot))
	reply(t, m, "toCancelled", "c", true)
	expectOutcome(t, m, "toCancelled", hitlv1.OutcomeClosed, hitlv1.CodeNotAnswerable)
	// Judged for what it is first: a bad batch to a finished question is
	// still Closed (the state comes before the batch rules), and the
	// outsider's unlabelled reply is FORBIDDEN.
	reply(t, m, "badToCancelled", "c", false)
	expectOutcome(t, m, "badToCancelled", hitlv1.OutcomeClosed, hitlv1.CodeNotAnswerable)
	if _, err := m.Reply(Sent{Name: "outsider", Question: "c", By: mallory, Valid: true}); err != nil {
		t.Fatal(err)
	}
	expectOutcome(t, m, "outsider", hitlv1.OutcomeRejected, hitlv1.CodeForbidden)

	var people []string
	groups := map[string][]string{}
	for i := range MaxVotes + 1 {
		people = append(people, fmt.Sprintf("person-%02d", i))
	}
	m = New(t0, Tenancy{Agent: bot, Answerers: people, Groups: groups})
	m.PutPolicy(Policy{Name: "p", Rule: RuleSpec{Approvals: MaxVotes + 1}})
	q := m.Ask(Ask{Name: "q", Created: t0.Add(time.Second)})
	seenLatest(m, "q")
	for i, by := range people {
		vote(t, m, fmt.Sprintf("v%02d", i), "q", by, true)
	}
	for i := range MaxVotes {
		expectOutcome(t, m, fmt.Sprintf("v%02d", i), hitlv1.OutcomeCounted, "")
	}
	expectOutcome(t, m, fmt.Sprintf("v%02d", MaxVotes), hitlv1.OutcomeRejected, hitlv1.CodeNotAnswerable)
	if len(q.Votes) != MaxVotes || q.State != hitlv1.StateOpen {
		t.Fatalf("%d votes, %s: the vote past MaxVotes is not counted and the question stays open", len(q.Votes), q.State)
	}
}
