package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
	"github.com/hitl-dev/hitl/pkg/agent"
	"github.com/hitl-dev/hitl/pkg/answerer"
	"github.com/hitl-dev/hitl/pkg/sealed"
)

// typedAsk is an ask with typed answers: replicas, an integer from 1 to 10
// that is required; day, a date; contact, an email address; notes, any
// text.
func typedAsk(name, ns string) *hitlv1.UserQuestion {
	lo, hi := intstr.FromInt32(1), intstr.FromInt32(10)
	return &hitlv1.UserQuestion{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: hitlv1.UserQuestionSpec{Agent: "bot", Questions: []hitlv1.Question{
			{ID: "replicas", Question: "How many replicas?", Input: &hitlv1.AnswerInput{Type: hitlv1.InputInteger, Minimum: &lo, Maximum: &hi, Required: true}},
			{ID: "day", Question: "Which day?", Input: &hitlv1.AnswerInput{Type: hitlv1.InputDate}},
			{ID: "contact", Question: "Whom to tell?", Input: &hitlv1.AnswerInput{Type: hitlv1.InputEmail}},
			{ID: "notes", Question: "Anything for the notes?"},
		}},
	}
}

// typedTyping is what a person types at typedAsk's prompts: a skip of the
// required replicas, "abc" and 12 before 4; a date in the wrong form
// before a good one; an address without @ before a good one; no notes.
const typedTyping = "\nabc\n12\n4\n24.12.2026\n2026-12-24\nops at example.com\nops@example.com\n\n"

var typedAnswers = []hitlv1.AnswerItem{{ID: "replicas", Custom: "4"}, {ID: "day", Custom: "2026-12-24"},
	{ID: "contact", Custom: "ops@example.com"}, {ID: "notes"}}

// typedReasks are what the prompts say of typedTyping: the rule shown,
// and each answer asked again.
var typedReasks = []string{
	"How many replicas?\n  your answer, an integer from 1 to 10 (required): ",
	"  replicas is required: it may not be skipped — try again\n",
	"  replicas: \"abc\" is not an integer (decimal digits, e.g. 42) — try again\n",
	"  replicas: 12 is above maximum 10 — try again\n",
	"Which day?\n  your answer, a date YYYY-MM-DD (Enter to skip): ",
	"  day: \"24.12.2026\" is not a date (YYYY-MM-DD, e.g. 2026-12-24) — try again\n",
	"Whom to tell?\n  your answer, an email address (Enter to skip): ",
	"  contact: \"ops at example.com\" is not an email address",
	"Anything for the notes?\n  your answer (Enter to skip): ",
}

// TestPromptChecksEachTypedAnswer checks the prompts on their own: each
// free-text answer is checked as it is typed and asked again with the
// rule, and a required question is not skipped.
func TestPromptChecksEachTypedAnswer(t *testing.T) {
	var out bytes.Buffer
	got, err := promptBatch(bufio.NewReader(strings.NewReader(typedTyping)), &out, typedAsk("scale", "agents"))
	if err != nil || !reflect.DeepEqual(got, typedAnswers) {
		t.Fatalf("got %v, %v; want %v\n%s", got, err, typedAnswers, out.String())
	}
	for _, want := range typedReasks {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the prompt does not say %q:\n%s", want, out.String())
		}
	}
	if n := strings.Count(out.String(), "try again"); n != 5 {
		t.Errorf("%d answers were asked again, want 5:\n%s", n, out.String())
	}

	// A required question with options: Enter does not skip it.
	q := typedAsk("pick", "agents")
	q.Spec.Questions = []hitlv1.Question{{ID: "env", Question: "Where?", Options: []hitlv1.QuestionOption{{Label: "staging"}, {Label: "prod"}},
		Input: &hitlv1.AnswerInput{Type: hitlv1.InputString, Required: true, Pattern: "^[a-z]+$"}}}
	out.Reset()
	got, err = promptBatch(bufio.NewReader(strings.NewReader("\nQA-1\nqa\n")), &out, q)
	if err != nil || !reflect.DeepEqual(got, []hitlv1.AnswerItem{{ID: "env", Custom: "qa"}}) {
		t.Fatalf("got %v, %v\n%s", got, err, out.String())
	}
	for _, want := range []string{"choose 1-2 or type your own answer, text matching pattern \"^[a-z]+$\" (required): ",
		"env is required: it may not be skipped — try again", `env: the answer does not match pattern "^[a-z]+$" — try again`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the prompt does not say %q:\n%s", want, out.String())
		}
	}
}

// sensitiveAsk is a question of agent bot with a sensitive token (sk-...,
// at least 16 characters) and free-text notes.
func sensitiveQuestions() []hitlv1.Question {
	return []hitlv1.Question{
		{ID: "token", Question: "The registry token?", Sensitive: true,
			Input: &hitlv1.AnswerInput{Type: hitlv1.InputString, MinLength: ptr.To[int32](16), Pattern: "^sk-"}},
		{ID: "notes", Question: "Anything for the notes?"},
	}
}

// The secret typed in the tests, and a bad one (too short): neither may be
// printed.
const (
	secretValue = "sk-live-9b1f3c5d7e"
	badSecret   = "sk-tiny"
)

func TestASensitiveValueIsNeverTakenFromTheCommandLine(t *testing.T) {
	q := &hitlv1.UserQuestion{ObjectMeta: metav1.ObjectMeta{Name: "secret", Namespace: "agents"},
		Spec: hitlv1.UserQuestionSpec{Agent: "bot", Questions: sensitiveQuestions()}}
	for _, flags := range [][2][]string{
		{nil, {"token=" + secretValue}},
		{{"token=" + secretValue}, nil},
	} {
		_, err := batchFromFlags(q, flags[0], flags[1], nil)
		if validation.CodeOf(err) != hitlv1.CodeBadAnswer || !strings.Contains(err.Error(), "never given as a command-line argument") ||
			!strings.Contains(err.Error(), "--sensitive-from-file token=PATH") {
			t.Errorf("%v: got %v, want BAD_ANSWER telling of --sensitive-from-file", flags, err)
		}
		if err != nil && strings.Contains(err.Error(), secretValue) {
			t.Errorf("the refusal shows the value: %v", err)
		}
	}
}

// sealedSettled is a settled question whose sensitive answer was sealed.
func sealedSettled(t *testing.T) (*hitlv1.UserQuestion, string) {
	t.Helper()
	key, err := sealed.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	q := at(&hitlv1.UserQuestion{ObjectMeta: metav1.ObjectMeta{Name: "secret", Namespace: "agents", UID: "uid-secret"},
		Spec: hitlv1.UserQuestionSpec{Agent: "bot", Questions: append(typedAsk("", "").Spec.Questions[:1], sensitiveQuestions()...),
			SealingKey: key.PublicKey()}}, t0)
	item, err := answerer.Seal(q, "token", secretValue)
	if err != nil {
		t.Fatal(err)
	}
	q.Status = hitlv1.UserQuestionStatus{State: hitlv1.StateSettled,
		Answers:    []hitlv1.AnswerItem{{ID: "replicas", Custom: "4"}, item, {ID: "notes"}},
		Settlement: &hitlv1.Settlement{Reply: "secret-x", At: metav1.NewMicroTime(t0), AnsweredBy: &hitlv1.UserInfo{Username: "bob"}}}
	return q, item.Sealed
}

// The card, the markdown and the reply file's header show the input rule
// and say that a sensitive answer was given, never its sealed text.
func TestRenderingOfTypedAndSensitiveQuestions(t *testing.T) {
	q, box := sealedSettled(t)
	var card, md bytes.Buffer
	printCard(&card, q, t0)
	printMarkdown(&md, q)
	header := string(replyHeader(q, &hitlv1.QuestionReply{Spec: hitlv1.QuestionReplySpec{Answers: q.Status.Answers}}))
	for name, c := range map[string]struct {
		out  string
		want []string
	}{
		"card": {card.String(), []string{"How many replicas?  (free text, id replicas)\n  expects an integer from 1 to 10; required\n",
			"The registry token?  (sensitive free text, id token)\n  expects text of at least 16 characters matching pattern \"^sk-\"\n" +
				"  sensitive: the answer is sealed for the asking agent; no one else can read it\n",
			"  token: (sensitive answer given)\n"}},
		"markdown": {md.String(), []string{"Expects an integer from 1 to 10; required.\n", "Sensitive: the answer is sealed",
			"- `token`: \\(sensitive answer given\\)"}},
		"reply header": {header, []string{"#   token: (sensitive answer given)\n"}},
	} {
		for _, want := range c.want {
			if !strings.Contains(c.out, want) {
				t.Errorf("the %s does not say %q:\n%s", name, want, c.out)
			}
		}
		if strings.Contains(c.out, box[:20]) || strings.Contains(c.out, secretValue) {
			t.Errorf("the %s shows the sealed text or the value:\n%s", name, c.out)
		}
	}
}

// kubectlHitlIn runs kubectl hitl in-process with a kubeconfig, in ns,
// with stdin (not a terminal) reading in.
func kubectlHitlIn(ctx context.Context, config, ns, in string, args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	cmd := NewCommand(genericiooptions.IOStreams{In: strings.NewReader(in), Out: &out, ErrOut: &errOut})
	cmd.SetArgs(append([]string{"--kubeconfig", config, "-n", ns}, args...))
	err = cmd.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

// TestTypedAnswersThroughTheCLI answers a question with typed answers at
// the prompts of `kubectl hitl answer`, against the API server: bad
// values are asked again with their rule, the required question is not
// skipped, and the reply holds the good values. By flags, a value out of
// bounds and a skipped required question are refused before anything is
// created.
func TestTypedAnswersThroughTheCLI(t *testing.T) {
	k := startCluster(t)
	ns := newNamespace(t, k)
	config := adminKubeconfig(t, k)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, name := range []string{"scale", "scale-by-flags"} {
		if err := k.Client.Create(ctx, typedAsk(name, ns)); err != nil {
			t.Fatal(err)
		}
	}

	out, errOut, err := kubectlHitlIn(ctx, config, ns, typedTyping, "answer", "scale")
	if err != nil {
		t.Fatalf("answer: %v\n%s", err, errOut)
	}
	if !strings.Contains(out, ": Applied — ") {
		t.Errorf("the answer was not applied:\n%s", out)
	}
	for _, want := range typedReasks {
		if !strings.Contains(errOut, want) {
			t.Errorf("the prompt does not say %q:\n%s", want, errOut)
		}
	}
	q, err := getQuestion(t, k, ns, "scale")
	if err != nil || q.Status.State != hitlv1.StateSettled || !reflect.DeepEqual(q.Status.Answers, typedAnswers) {
		t.Fatalf("the question is %s with %v (%v), want Settled with %v", q.Status.State, q.Status.Answers, err, typedAnswers)
	}
	if n, err := q.Status.Answers[0].Int(); err != nil || n != 4 {
		t.Errorf("replicas reads as %d, %v", n, err)
	}

	for args, want := range map[string]string{
		"--custom replicas=12":                   "BAD_ANSWER: question replicas: 12 is above maximum 10 (input.type integer)",
		"--custom replicas=4 --custom day=24.12": `BAD_ANSWER: question day: "24.12" is not a date`,
		"--custom day=2026-12-24":                "BAD_ANSWER: question replicas: the question is required (input.required): it may not be skipped",
	} {
		_, errOut, err := kubectlHitl(ctx, config, ns, append([]string{"answer", "scale-by-flags"}, strings.Fields(args)...)...)
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("answer %s: got %v, want %q\n%s", args, err, want, errOut)
		}
	}
	var replies hitlv1.QuestionReplyList
	if err := k.Client.List(ctx, &replies, client.InNamespace(ns), client.MatchingLabels{hitlv1.QuestionLabel: "scale-by-flags"}); err != nil || len(replies.Items) != 0 {
		t.Fatalf("a refused answer created a reply: %v, %v", replies.Items, err)
	}
	out, errOut, err = kubectlHitl(ctx, config, ns, "answer", "scale-by-flags", "--custom", "replicas=10", "--custom", "contact=ops@example.com")
	if err != nil || !strings.Contains(out, ": Applied — ") {
		t.Fatalf("answer by flags: %v\n%s%s", err, out, errOut)
	}
}

// TestSensitiveAnswersThroughTheCLI answers the sensitive question of an
// agent's ask with `kubectl hitl answer`, stdin not a terminal: at the
// prompt, with --sensitive-from-file from stdin and from a file. Each
// reply holds only the sealed value, which the agent's key opens to the
// exact value; the CLI's stdout and stderr, and show, never hold it; a
// value given as an argument, or one that breaks its rule, is refused
// without being shown and creates nothing.
func TestSensitiveAnswersThroughTheCLI(t *testing.T) {
	k := startCluster(t)
	ns := newNamespace(t, k)
	config := adminKubeconfig(t, k)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bot := agent.New(k.Client, ns, "bot")
	secretFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(secretFile, []byte(secretValue+"\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	// noValue fails the test when a command's output shows a value.
	noValue := func(t *testing.T, what, output string) {
		t.Helper()
		for _, v := range []string{secretValue, badSecret} {
			if strings.Contains(output, v) {
				t.Errorf("%s shows a sensitive value %q:\n%s", what, v, output)
			}
		}
	}
	// sealedOnly checks that the question's one reply holds only a sealed
	// token that the agent's key opens to secretValue.
	sealedOnly := func(t *testing.T, name string) {
		t.Helper()
		var replies hitlv1.QuestionReplyList
		if err := k.Client.List(ctx, &replies, client.InNamespace(ns), client.MatchingLabels{hitlv1.QuestionLabel: name}); err != nil || len(replies.Items) != 1 {
			t.Fatalf("replies to %s: %v, %v", name, replies.Items, err)
		}
		token := replies.Items[0].Spec.Answers[0]
		if token.ID != "token" || token.Sealed == "" || token.Custom != "" || len(token.Selected) != 0 {
			t.Fatalf("the reply's token is %+v, want only sealed", token)
		}
		data, _ := json.Marshal(replies.Items[0])
		noValue(t, "the reply", string(data))
		q, err := getQuestion(t, k, ns, name)
		if err != nil || q.Status.State != hitlv1.StateSettled {
			t.Fatalf("question %s: %v, %v", name, q.Status.State, err)
		}
		key, err := bot.SealingKey()
		if err != nil {
			t.Fatal(err)
		}
		got, err := key.Open(token.Sealed, sealed.Binding{Namespace: ns, Question: name, UID: string(q.UID), ID: "token"})
		if err != nil || got != secretValue {
			t.Fatalf("the sealed token opens to %q, %v; want the exact value typed", got, err)
		}
		res, err := bot.ResultOf(q)
		if err != nil || res.Sensitive["token"] != secretValue {
			t.Errorf("the agent's result: %v, %v", res.Sensitive, err)
		}
		for _, format := range []string{"", "markdown"} {
			args := []string{"show", name}
			if format != "" {
				args = append(args, "-o", format)
			}
			out, errOut, err := kubectlHitl(ctx, config, ns, args...)
			given := "token: (sensitive answer given)"
			if format == "markdown" {
				given = "`token`: \\(sensitive answer given\\)"
			}
			if err != nil || !strings.Contains(out, given) || strings.Contains(out, token.Sealed[:20]) {
				t.Errorf("show %s (%v) does not say the answer was given, or shows its sealed text:\n%s%s", format, err, out, errOut)
			}
			noValue(t, "show", out+errOut)
		}
	}
	ask := func(t *testing.T, name string) {
		t.Helper()
		if _, err := bot.Create(ctx, agent.Request{Name: name, Questions: sensitiveQuestions()}, nil); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("at the prompt", func(t *testing.T) {
		ask(t, "prompted")
		// Too short first: asked again with the rule, not the value.
		out, errOut, err := kubectlHitlIn(ctx, config, ns, badSecret+"\n"+secretValue+"\n\n", "answer", "prompted")
		if err != nil || !strings.Contains(out, ": Applied — ") {
			t.Fatalf("answer: %v\n%s%s", err, out, errOut)
		}
		for _, want := range []string{"The registry token?  (sensitive free text, id token)",
			"your answer, text of at least 16 characters matching pattern \"^sk-\", not shown as you type and sealed for the agent only (Enter to skip): ",
			"token: the answer is not text of at least 16 characters matching pattern \"^sk-\" — try again"} {
			if !strings.Contains(errOut, want) {
				t.Errorf("the prompt does not say %q:\n%s", want, errOut)
			}
		}
		noValue(t, "answer", out+errOut)
		sealedOnly(t, "prompted")
	})

	t.Run("from stdin", func(t *testing.T) {
		ask(t, "piped")
		out, errOut, err := kubectlHitlIn(ctx, config, ns, secretValue+"\n", "answer", "piped", "--sensitive-from-file", "token=-", "-o", "yaml")
		if err != nil || !strings.Contains(errOut, ": Applied — ") || !strings.Contains(out, "sealed: ") {
			t.Fatalf("answer: %v\n%s%s", err, out, errOut)
		}
		noValue(t, "answer", out+errOut)
		sealedOnly(t, "piped")
	})

	t.Run("from a file", func(t *testing.T) {
		ask(t, "filed")
		out, errOut, err := kubectlHitl(ctx, config, ns, "answer", "filed", "--sensitive-from-file", "token="+secretFile, "--custom", "notes=rotated")
		if err != nil || !strings.Contains(out, ": Applied — ") {
			t.Fatalf("answer: %v\n%s%s", err, out, errOut)
		}
		noValue(t, "answer", out+errOut)
		sealedOnly(t, "filed")
	})

	t.Run("refused", func(t *testing.T) {
		ask(t, "refused")
		for _, c := range []struct {
			in   string
			args []string
			want string
		}{
			{"", []string{"--custom", "token=" + secretValue}, "BAD_ANSWER: question token: the question is sensitive: its answer is never given as a command-line argument (--custom)"},
			{"", []string{"--select", "token=" + secretValue}, "BAD_ANSWER: question token: the question is sensitive: its answer is never given as a command-line argument (--select)"},
			{badSecret + "\n", []string{"--sensitive-from-file", "token=-"}, `BAD_ANSWER: question token: the answer is not text of at least 16 characters matching pattern "^sk-"`},
			{"\n", []string{"--sensitive-from-file", "token=-"}, "--sensitive-from-file token: the answer is empty"},
			{secretValue, []string{"--sensitive-from-file", "notes=-"}, "BAD_ANSWER: question notes: the question is not sensitive"},
		} {
			out, errOut, err := kubectlHitlIn(ctx, config, ns, c.in, append([]string{"answer", "refused"}, c.args...)...)
			if err == nil || !strings.HasPrefix(err.Error(), c.want) {
				t.Errorf("answer %s: got %v, want %q", strings.Join(c.args, " "), err, c.want)
			}
			if err != nil {
				noValue(t, "the error", err.Error())
			}
			noValue(t, "answer", out+errOut)
		}
		var replies hitlv1.QuestionReplyList
		if err := k.Client.List(ctx, &replies, client.InNamespace(ns), client.MatchingLabels{hitlv1.QuestionLabel: "refused"}); err != nil || len(replies.Items) != 0 {
			t.Fatalf("a refused answer created a reply: %v, %v", replies.Items, err)
		}
	})
}

// TestAskATypedAndASensitiveQuestion asks with `kubectl hitl ask
// --question` and its input flags: the question has the input rule asked
// for; a sensitive one is sealed to ask's key, and its answer is printed
// opened on ask's stdout only, and with --sealing-key-file read by admit
// after ask ended pending.
func TestAskATypedAndASensitiveQuestion(t *testing.T) {
	k := startCluster(t)
	ns := newNamespace(t, k)
	config := adminKubeconfig(t, k)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	type result struct {
		stdout, stderr string
		err            error
	}
	start := func(args ...string) <-chan result {
		done := make(chan result, 1)
		go func() {
			out, errOut, err := kubectlHitl(ctx, config, ns, append([]string{"ask", "--agent", "bot"}, args...)...)
			done <- result{out, errOut, err}
		}()
		return done
	}
	asked := func(name string) *hitlv1.UserQuestion {
		t.Helper()
		var q *hitlv1.UserQuestion
		eventually(t, 30*time.Second, func() bool {
			var err error
			q, err = getQuestion(t, k, ns, name)
			return err == nil && q.Status.State == hitlv1.StateOpen
		}, func() string { return "question " + name + " was not asked" })
		return q
	}
	type askResult struct {
		Answers   []hitlv1.AnswerItem `json:"answers"`
		Sensitive map[string]string   `json:"sensitive"`
	}
	var res askResult

	done := start("--name", "replicas", "--question", "How many replicas?", "--id", "replicas",
		"--type", "integer", "--min", "1", "--max", "10", "--required")
	q := asked("replicas")
	want := &hitlv1.AnswerInput{Type: hitlv1.InputInteger, Minimum: ptr.To(intstr.FromInt32(1)), Maximum: ptr.To(intstr.FromInt32(10)), Required: true}
	if got := q.Spec.Questions[0]; got.ID != "replicas" || !reflect.DeepEqual(got.Input, want) || got.Sensitive {
		t.Fatalf("ask --type integer --min 1 --max 10 --required asked %+v (input %+v)", got, got.Input)
	}
	if _, _, err := kubectlHitl(ctx, config, ns, "answer", "replicas", "--custom", "replicas=11"); err == nil {
		t.Error("11 was taken for an integer from 1 to 10")
	}
	if _, errOut, err := kubectlHitl(ctx, config, ns, "answer", "replicas", "--custom", "replicas=7"); err != nil {
		t.Fatalf("answer: %v\n%s", err, errOut)
	}
	got := <-done
	if err := json.Unmarshal([]byte(got.stdout), &res); got.err != nil || err != nil || len(res.Answers) != 1 || res.Answers[0].Custom != "7" {
		t.Fatalf("ask: %v, %v\n%s%s", got.err, err, got.stdout, got.stderr)
	}

	done = start("--name", "token", "--question", "The registry token?", "--id", "token", "--sensitive", "--min-length", "16")
	q = asked("token")
	if got := q.Spec.Questions[0]; !got.Sensitive || got.Input == nil || *got.Input.MinLength != 16 || q.Spec.SealingKey == "" {
		t.Fatalf("ask --sensitive --min-length 16 asked %+v with sealing key %q", got, q.Spec.SealingKey)
	}
	a := answerer.New(k.Client, ns, "test", "bot")
	if out, err := a.Reply(ctx, "token", []hitlv1.AnswerItem{answerer.Sensitive("token", secretValue)}); err != nil || out.Err() != nil {
		t.Fatalf("reply: %v, %v", err, out.Err())
	}
	got = <-done
	res = askResult{}
	if err := json.Unmarshal([]byte(got.stdout), &res); got.err != nil || err != nil || res.Sensitive["token"] != secretValue {
		t.Fatalf("ask's result does not hold the opened value: %v, %v\n%s", got.err, err, got.stdout)
	}
	if strings.Contains(got.stderr, secretValue) {
		t.Errorf("ask's stderr shows the value:\n%s", got.stderr)
	}
	if res.Answers[0].Sealed == "" || res.Answers[0].Custom != "" {
		t.Errorf("ask's answers hold %+v, want only the sealed value", res.Answers[0])
	}

	// Pending, then admitted with the key ask kept.
	keyFile := filepath.Join(t.TempDir(), "key")
	done = start("--name", "late", "--question", "The registry token?", "--id", "token", "--sensitive", "--timeout", "1s",
		"--sealing-key-file", keyFile)
	got = <-done
	if got.err == nil || !strings.Contains(got.stdout, `"pending": true`) {
		t.Fatalf("ask --timeout 1s: %v\n%s%s", got.err, got.stdout, got.stderr)
	}
	if info, err := os.Stat(keyFile); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("the key file: %v, %v", info, err)
	}
	if out, err := a.Reply(ctx, "late", []hitlv1.AnswerItem{answerer.Sensitive("token", secretValue)}); err != nil || out.Outcome != hitlv1.OutcomeQueued {
		t.Fatalf("late reply: %+v, %v", out, err)
	}
	out, errOut, err := kubectlHitl(ctx, config, ns, "admit", "late", "--sealing-key-file", keyFile)
	res = askResult{}
	if err != nil || json.Unmarshal([]byte(out), &res) != nil || res.Sensitive["token"] != secretValue {
		t.Fatalf("admit --sealing-key-file: %v\n%s%s", err, out, errOut)
	}
	if strings.Contains(errOut, secretValue) {
		t.Errorf("admit's stderr shows the value:\n%s", errOut)
	}
}
