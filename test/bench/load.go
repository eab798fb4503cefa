// The load the workloads make: questions and replies as the SDKs and
// kubectl hitl write them, and jobs run on parallel workers.

package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/test/builders"
)

var seq atomic.Int64

func name(prefix string) string { return fmt.Sprintf("%s-%d", prefix, seq.Add(1)) }

// parallel runs n jobs on `workers` goroutines and returns how long they took.
func parallel(ctx context.Context, n, workers int, job func(ctx context.Context, i int) error) (time.Duration, error) {
	start := time.Now()
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := job(ctx, i); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start), first
}

// blocking is a question as the agent SDK asks it: with the
// hitl.dev/agent label that names its agent.
func blocking(n string) *hitlv1.UserQuestion {
	return builders.Question(n, ns).Agent("bench").Label(hitlv1.AgentLabel, "bench").Ask("q", "Proceed?", "yes", "no").Obj()
}

// answer is a reply to q as kubectl hitl and the answerer SDK write it:
// labelled with its agent and question and owned by the question, with no
// author of its own (admission stamps the requesting user's).
func answer(q *hitlv1.UserQuestion) *hitlv1.QuestionReply {
	r := builders.Reply(q.Name+"-r", ns, q.Name).Select("q", "yes").Obj()
	r.Spec.AnsweredBy = nil
	r.Labels = map[string]string{hitlv1.AgentLabel: q.Spec.Agent, hitlv1.QuestionLabel: q.Name}
	r.Adopt(q)
	return r
}

func timed(n string, timeout time.Duration) *hitlv1.UserQuestion {
	return builders.Question(n, ns).Agent("bench").Label(hitlv1.AgentLabel, "bench").Ask("q", "Proceed?", "yes", "no").Timeout(timeout).Obj()
}
