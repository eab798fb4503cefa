package agent_test

import (
	"context"
	"fmt"
	"log"
	"time"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/pkg/agent"
)

// An agent in a Pod asks where to deploy and blocks until a person answers.
func ExampleAgent_Ask() {
	a, err := agent.NewInCluster("release-bot")
	if err != nil {
		log.Fatal(err)
	}
	res, err := a.Ask(context.Background(), agent.Request{Questions: []hitlv1.Question{{
		ID:       "target",
		Question: "Where should I deploy?",
		Options:  []hitlv1.QuestionOption{{Label: "staging"}, {Label: "production"}},
	}}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("deploying to", res.Answers[0].Selected)
}

// A timed ask returns Pending when nobody answered within the window; the
// question stays answerable, and the answer arrives later as a late reply
// that the agent admits.
func ExampleAgent_AskTimed() {
	a, err := agent.NewInCluster("release-bot")
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	res, err := a.AskTimed(ctx, agent.Request{Questions: []hitlv1.Question{{
		ID: "notes", Question: "Anything to add to the release notes?",
	}}}, 2*time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	if !res.Pending {
		fmt.Println("notes:", res.Answers[0].Custom)
		return
	}
	late, err := a.LateReplies(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for r := range late {
		if r.Question != res.Question {
			continue
		}
		settled, err := a.Admit(ctx, r.Question, r.Reply)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("notes, late:", settled.Answers[0].Custom)
		return
	}
}
