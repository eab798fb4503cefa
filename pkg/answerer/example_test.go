package answerer_test

import (
	"context"
	"fmt"
	"log"
	"time"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/pkg/answerer"
)

// An answerer service watches release-bot's questions, holds the window of
// each while it works on it, and answers the first question of each batch
// with its first option.
func ExampleAnswerer_Watch() {
	a, err := answerer.NewInCluster("approver-bot", "release-bot")
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	events, err := a.Watch(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for ev := range events {
		q := ev.Question
		if !q.Answerable() || len(q.Spec.Questions[0].Options) == 0 {
			continue
		}
		claim, err := a.Claim(ctx, q.Name, time.Minute)
		if err != nil {
			log.Print(err)
			continue
		}
		first := q.Spec.Questions[0]
		out, err := a.Reply(ctx, q.Name, []hitlv1.AnswerItem{{ID: first.ID, Selected: []string{first.Options[0].Label}}})
		_ = claim.Close()
		if err != nil {
			log.Print(err)
			continue
		}
		fmt.Println(q.Name, out.Outcome)
	}
}
