// Command agent is a small agent built on pkg/agent, for the end-to-end
// suite: it asks one question and prints the result as JSON, admitting a
// late reply when asked to.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
	"github.com/hitl-dev/hitl/pkg/agent"
)

func main() {
	var (
		namespace = flag.String("namespace", "default", "namespace to ask in")
		name      = flag.String("agent", "e2e-agent", "the agent's name")
		question  = flag.String("name", "", "the question's name")
		text      = flag.String("question", "Proceed?", "the question")
		options   = flag.String("options", "yes,no", "comma-separated option labels")
		timeout   = flag.Duration("timeout", 0, "foreground window; 0 asks a blocking question")
		admit     = flag.Bool("admit-late", false, "when pending, wait for the late reply and admit it")
		secret    = flag.Bool("sensitive", false, "ask a sensitive free-text question (no options); the result's sensitive map holds the opened answer")
	)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *secret {
		*options = ""
	}
	if err := run(ctx, *namespace, *name, *question, *text, *options, *timeout, *admit, *secret); err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		fmt.Printf("{\"error\": %q, \"code\": %q}\n", err.Error(), validation.CodeOf(err))
		os.Exit(2)
	}
}

func run(ctx context.Context, namespace, name, question, text, options string, timeout time.Duration, admit, secret bool) error {
	c, err := client.NewWithWatch(ctrl.GetConfigOrDie(), client.Options{Scheme: hitlv1.NewScheme()})
	if err != nil {
		return err
	}
	a := agent.New(c, namespace, name)
	q := hitlv1.Question{ID: "q", Question: text, Sensitive: secret}
	for _, l := range strings.Split(options, ",") {
		if l != "" {
			q.Options = append(q.Options, hitlv1.QuestionOption{Label: l})
		}
	}
	req := agent.Request{Name: question, Questions: []hitlv1.Question{q}}

	var res agent.Result
	if timeout == 0 {
		res, err = a.Ask(ctx, req)
	} else {
		res, err = a.AskTimed(ctx, req, timeout)
	}
	if err != nil {
		return err
	}
	if res.Pending && admit {
		emit(res)
		late, err := a.LateReplies(ctx)
		if err != nil {
			return err
		}
		for r := range late {
			if r.Question == res.Question {
				if res, err = a.Admit(ctx, r.Question, r.Reply); err != nil {
					return err
				}
				break
			}
		}
	}
	emit(res)
	return nil
}

func emit(res agent.Result) {
	data, _ := json.Marshal(res)
	fmt.Println(string(data))
}
