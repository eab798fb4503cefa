package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/pkg/answerer"
)

// claimDuration is the duration of the inbox's claims (their
// spec.durationSeconds); they are renewed while the person is prompted.
// Tests shorten it.
var claimDuration = 30 * time.Second

type inboxOptions struct {
	*common
	agents []string
	holder string
	once   bool
	hold   bool
	web    webOptions
}

func newInboxCommand(c *common) *cobra.Command {
	o := &inboxOptions{common: c}
	cmd := &cobra.Command{
		Use:   "inbox",
		Short: "Answer questions as they arrive: shows each, claims it while you answer, sends the reply",
		Long: `An interactive answerer. For each answerable question of the selected agents
it prints the card, claims the question (so its window does not close while you
read and type, counting down the time left), prompts for the answers and sends
the reply. Questions that are Continued are answered late: the reply is queued
until the agent admits it.`,
		Example: `  kubectl hitl inbox --agent release-bot,office-bot
  kubectl hitl inbox --web -n agents   # in your browser`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return run(cmd.Context(), o) },
	}
	cmd.Flags().StringSliceVar(&o.agents, "agent", nil, "the agents whose questions to answer (default: all)")
	cmd.Flags().StringVar(&o.holder, "holder", "", "names this inbox in its logs only: a claim's holder is your Kubernetes identity")
	_ = cmd.Flags().MarkDeprecated("holder", "a claim's holder is your Kubernetes identity, stamped by the API server")
	cmd.Flags().BoolVar(&o.once, "once", false, "exit after answering one question")
	cmd.Flags().BoolVar(&o.hold, "hold", false, `take your time: keep the window open until you answer, instead of giving it back when the countdown ends`)
	o.web.addFlags(cmd)
	return cmd
}

func (o *inboxOptions) Complete() error {
	if o.holder == "" {
		host, _ := os.Hostname()
		o.holder = "kubectl-hitl/" + os.Getenv("USER") + "@" + host
	}
	return o.complete()
}

func (o *inboxOptions) Validate() error { return nil }

func (o *inboxOptions) Run(ctx context.Context) error {
	if o.web.enabled {
		return o.runWeb(ctx)
	}
	a := answerer.New(o.client, o.namespace, o.holder, o.agents...)
	events, err := a.Watch(ctx)
	if err != nil {
		return err
	}
	who := "all agents"
	if len(o.agents) > 0 {
		who = strings.Join(o.agents, ", ")
	}
	fmt.Fprintf(o.streams.ErrOut, "Waiting for questions of %s in namespace %s (Ctrl-C to stop)...\n", who, o.namespace)
	in := newPrompter(ctx, o.streams.In, o.streams.ErrOut)
	done := map[string]bool{}
	for ev := range events {
		q := ev.Question
		if ev.Type == watch.Deleted || done[q.Name] || !q.Answerable() {
			continue
		}
		done[q.Name] = true
		if o.voted(ctx, q) {
			continue
		}
		if err := o.answer(ctx, a, in, q); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			fmt.Fprintf(o.streams.ErrOut, "%v\n\n", err)
			if strings.Contains(err.Error(), "input ended") {
				return err
			}
		}
		if o.once {
			return nil
		}
	}
	return ctx.Err()
}

// voted reports whether the user has voted on q, a governed question,
// already, and then says so instead of offering a second vote, which the
// controller would reject (DUPLICATE_VOTE).
func (o *inboxOptions) voted(ctx context.Context, q *hitlv1.UserQuestion) bool {
	ap, me, ok := o.voter(ctx, q)
	if !ok {
		return false
	}
	v := ap.VoteOf(me)
	if v == nil {
		return false
	}
	fmt.Fprintf(o.streams.ErrOut, "%s/%s: you voted %s (votes %s)", q.Namespace, q.Name, v.Choice, ap.Tally)
	if needs := ap.Needs(); len(needs) > 0 {
		fmt.Fprintf(o.streams.ErrOut, "; it still needs %s", strings.Join(needs, "; "))
	}
	fmt.Fprint(o.streams.ErrOut, "\n\n")
	return true
}

// answer holds a claim on q while the person answers, then sends the reply.
func (o *inboxOptions) answer(ctx context.Context, a *answerer.Answerer, in *prompter, q *hitlv1.UserQuestion) error {
	out := o.streams.ErrOut
	printCard(out, q, nowFunc())
	if q.Status.State == hitlv1.StateContinued {
		fmt.Fprintln(out, "The window has closed: your answer will be queued until the agent admits it.")
	}
	claim, err := a.Claim(ctx, q.Name, claimDuration)
	if err != nil {
		return fmt.Errorf("claiming %s: %w", q.Name, err)
	}
	defer func() { _ = claim.Close() }()
	stop := make(chan struct{})
	defer close(stop)
	go warnWhenLost(out, q.Name, claim, stop)
	switch {
	case claim.Remaining > 0 && o.hold:
		fmt.Fprintf(out, "You hold the window (%s were left); it stays open until you answer.\n", claim.Remaining.Round(time.Second))
	case claim.Remaining > 0:
		// Count down locally from what the controller had left; when it
		// ends, give the window back, as the specification asks.
		fmt.Fprintf(out, "You hold the window: %s left.\n", claim.Remaining.Round(time.Second))
		go countdown(out, nowFunc().Add(claim.Remaining), stop, func() {
			_ = claim.Close()
			fmt.Fprintln(out, "\n(the window has closed: your answer will arrive late)")
		})
	}
	answers, err := in.batch(q)
	if err != nil {
		return err
	}
	// Bound to the question shown: its uid, and its spec digest once the
	// controller has written it.
	res, err := a.Create(ctx, &hitlv1.QuestionReply{
		ObjectMeta: metav1.ObjectMeta{GenerateName: q.Name + "-"},
		Spec: hitlv1.QuestionReplySpec{
			QuestionRef: hitlv1.QuestionReference{Name: q.Name, UID: q.UID, SpecDigest: q.Status.SpecDigest},
			Answers:     answers,
		},
	})
	if err != nil {
		return err
	}
	return reportOutcome(o.common, res)
}

// warnWhenLost tells the person, while they are prompted, that their claim
// on a question was lost (it could not be renewed, or its QuestionClaim
// went), so that the window is no longer held for them; unless stop is
// closed first.
func warnWhenLost(out io.Writer, question string, claim *answerer.Claim, stop <-chan struct{}) {
	select {
	case <-claim.Lost():
		fmt.Fprintf(out, "\nwarning: your claim on %s cannot be renewed: the window is no longer held open for you, "+
			"and an answer after its deadline will be queued as late (%v)\n", question, claim.Err())
	case <-stop:
	}
}

// countdown prints the time left every 10 seconds, and calls ended when
// end comes, unless stop is closed first.
func countdown(out io.Writer, end time.Time, stop <-chan struct{}, ended func()) {
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	deadline := time.NewTimer(time.Until(end))
	defer deadline.Stop()
	for {
		select {
		case <-stop:
			return
		case <-deadline.C:
			ended()
			return
		case now := <-tick.C:
			fmt.Fprintf(out, "  (%s left)\n", end.Sub(now).Round(time.Second))
		}
	}
}
