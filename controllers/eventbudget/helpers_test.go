package eventbudget

import (
	"time"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/test/builders"
)

// seen is the fake clock's start in this package's tests.
var seen = time.Date(2030, time.March, 4, 12, 0, 0, 0, time.UTC)

// seenPlus is n seconds after seen.
func seenPlus(n float64) time.Time { return seen.Add(time.Duration(n * float64(time.Second))) }

// askName is the name of the question the Events are about.
const askName = "deploy-plan"

// aQuestion is a question the Events are about.
func aQuestion() *hitlv1.UserQuestion {
	return builders.Question(askName, "agents").Agent("coder").Ask("color", "Which color?").Obj()
}

// aReply is a reply to aQuestion.
func aReply(name string) *hitlv1.QuestionReply {
	return builders.Reply(name, "agents", askName).Select("color", "red").Obj()
}
