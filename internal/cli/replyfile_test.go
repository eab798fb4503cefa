package cli

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
	"github.com/hitl-dev/hitl/test/builders"
)

// boundOpen is timedOpen as the API server and the controller have it,
// with a uid and a spec digest.
func boundOpen() *hitlv1.UserQuestion {
	q := timedOpen()
	q.UID = "uid-deploy"
	q.Status.SpecDigest = "sha256:" + strings.Repeat("cd", 32)
	return q
}

// readReplyFile reads a reply file back as the GitOps engine would (strict
// YAML) and returns the reply and the file's text.
func readReplyFile(t *testing.T, path string) (*hitlv1.QuestionReply, string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	reply := &hitlv1.QuestionReply{}
	if err := yaml.UnmarshalStrict(data, reply); err != nil {
		t.Fatalf("%s does not read back as a QuestionReply: %v\n%s", path, err, data)
	}
	return reply, string(data)
}

// header is the comment lines that open a reply file; it fails the test
// when a line before the manifest is not a comment.
func header(t *testing.T, file string) string {
	t.Helper()
	head, _, found := strings.Cut(file, "apiVersion: ")
	if !found {
		t.Fatalf("no manifest in:\n%s", file)
	}
	for _, line := range strings.Split(strings.TrimSuffix(head, "\n"), "\n") {
		if !strings.HasPrefix(line, "#") {
			t.Fatalf("line %q before the manifest is not a comment:\n%s", line, file)
		}
	}
	return head
}

func TestAnswerToFileWritesAReplyBoundToTheQuestion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "reply.yaml")
	_, out, err := runAs(t, "alice", []client.Object{boundOpen()},
		"answer", "deploy", "--select", "env=prod", "--custom", "notes=ship it", "--to-file", path)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	reply, file := readReplyFile(t, path)
	q := boundOpen()
	wantRef := hitlv1.QuestionReference{Name: "deploy", UID: q.UID, SpecDigest: q.Status.SpecDigest}
	if reply.Spec.QuestionRef != wantRef {
		t.Errorf("questionRef %+v, want %+v", reply.Spec.QuestionRef, wantRef)
	}
	wantAnswers := []hitlv1.AnswerItem{{ID: "env", Selected: []string{"prod"}}, {ID: "notes", Custom: "ship it"}}
	if !reflect.DeepEqual(reply.Spec.Answers, wantAnswers) {
		t.Errorf("answers %+v, want %+v", reply.Spec.Answers, wantAnswers)
	}
	if reply.Kind != "QuestionReply" || reply.APIVersion != "hitl.dev/v1alpha1" || reply.Namespace != "agents" ||
		reply.Name != stableReplyName("deploy", "alice") || reply.Labels[hitlv1.QuestionLabel] != "deploy" {
		t.Errorf("manifest %+v", reply.ObjectMeta)
	}
	head := header(t, file)
	if reply.Spec.AnsweredBy != nil || strings.Contains(strings.TrimPrefix(file, head), "answeredBy") {
		t.Errorf("the manifest sets spec.answeredBy, which the API server stamps:\n%s", file)
	}
	for _, want := range []string{"question agents/deploy of agent release-bot", "uid:         uid-deploy\n",
		"spec digest: " + q.Status.SpecDigest + "\n", "#   env: prod\n", "#   notes: \"ship it\"\n",
		"kubectl hitl show deploy -n agents -o markdown"} {
		if !strings.Contains(head, want) {
			t.Errorf("the header does not say %q:\n%s", want, head)
		}
	}
	if want := "reply " + reply.Name + " to question deploy written to " + path; !strings.Contains(out, want) {
		t.Errorf("the command printed %q, want %q", out, want)
	}
}

func TestReplyFileNameIsStable(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "reply.yaml")
	write := func(user string, args ...string) *hitlv1.QuestionReply {
		t.Helper()
		args = append([]string{"answer", "deploy", "--to-file", path}, args...)
		if _, out, err := runAs(t, user, []client.Object{boundOpen()}, args...); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		r, _ := readReplyFile(t, path)
		return r
	}
	first := write("alice", "--select", "env=staging")
	again := write("alice", "--select", "env=prod")
	if first.Name != again.Name || again.Spec.Answers[0].Selected[0] != "prod" {
		t.Errorf("preparing the reply again named it %s, then %s (answers %v)", first.Name, again.Name, again.Spec.Answers)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the directory holds %d files, want the reply file alone", len(entries))
	}
	if bob := write("bob", "--select", "env=prod"); bob.Name == first.Name {
		t.Errorf("alice's and bob's replies share the name %s", bob.Name)
	}
	if named := write("alice", "--select", "env=prod", "--name", "deploy-by-hand"); named.Name != "deploy-by-hand" {
		t.Errorf("--name gave %s", named.Name)
	}

	long := strings.Repeat("a", 200) + "." + strings.Repeat("b", 52) // 253 characters
	name := stableReplyName(long, "alice")
	if errs := utilvalidation.IsDNS1123Subdomain(name); len(errs) > 0 || name != stableReplyName(long, "alice") {
		t.Errorf("the reply to a question with the longest name is named %q: %v", name, errs)
	}
}

func TestToFileDashPrintsTheDryRunAfterItsHeader(t *testing.T) {
	args := []string{"approve", "gate"}
	_, withHeader, err := runAs(t, "alice", []client.Object{governedOpen()}, append(args, "--to-file", "-")...)
	if err != nil {
		t.Fatal(err)
	}
	_, dryRun, err := runAs(t, "alice", []client.Object{governedOpen()}, append(args, "--dry-run=client")...)
	if err != nil {
		t.Fatal(err)
	}
	head := header(t, withHeader)
	if withHeader != head+dryRun {
		t.Errorf("--to-file - is not the header and the --dry-run=client manifest:\n%s\n--- dry run:\n%s", withHeader, dryRun)
	}
	if !strings.Contains(dryRun, "name: "+stableReplyName("gate", "alice")+"\n") {
		t.Errorf("--dry-run=client names the reply otherwise:\n%s", dryRun)
	}
}

func TestToFileRefusesAFinishedQuestion(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"settled", []string{"answer", "lunch", "--select", "food=pizza"}, "NOT_ANSWERABLE: question lunch is Settled"},
		{"settled, interactive", []string{"answer", "lunch"}, "NOT_ANSWERABLE: question lunch is Settled"},
		{"cancelled", []string{"answer", "gone", "--custom", "q=late"}, "NOT_ANSWERABLE: question gone is Cancelled"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "reply.yaml")
			for _, manifest := range [][]string{{"--to-file", path}, {"--dry-run=client"}} {
				_, out, err := runAs(t, "alice", fixtures(), append(c.args, manifest...)...)
				if validation.CodeOf(err) != hitlv1.CodeNotAnswerable || !strings.HasPrefix(err.Error(), c.want) {
					t.Errorf("%v: got %v, want %q", manifest, err, c.want)
				}
				if strings.Contains(out, "What for lunch?") {
					t.Errorf("the question was prompted for before the refusal:\n%s", out)
				}
			}
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Errorf("a file was written for a finished question: %v", err)
			}
		})
	}

	// A queued late reply may be withdrawn before the file is applied.
	path := filepath.Join(t.TempDir(), "reply.yaml")
	_, out, err := runAs(t, "alice", fixtures(), "deny", "access", "--to-file", path)
	if err != nil || !strings.Contains(out, "warning: REPLY_QUEUED: question access already has queued reply access-carol") {
		t.Errorf("a question with a queued reply: %v\n%s", err, out)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("no file was written: %v", err)
	}
}

func TestToFileReplacesOnlyAReplyToTheSameQuestion(t *testing.T) {
	const configMap = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: keep-me\n"
	otherQuestion := "apiVersion: hitl.dev/v1alpha1\nkind: QuestionReply\nmetadata:\n  name: r\n  namespace: agents\nspec:\n  questionRef:\n    name: lunch\n"
	otherNamespace := strings.Replace(otherQuestion, "name: lunch", "name: deploy", 1)
	otherNamespace = strings.Replace(otherNamespace, "namespace: agents", "namespace: prod", 1)
	sameQuestion := strings.Replace(otherQuestion, "name: lunch", "name: deploy", 1)
	answer := []string{"answer", "deploy", "--select", "env=prod"}

	for name, content := range map[string]string{
		"another manifest":                 configMap,
		"a reply to another question":      otherQuestion,
		"a reply in another namespace":     otherNamespace,
		"the reply and another manifest":   sameQuestion + "---\n" + configMap,
		"not YAML":                         "{{ .Values.reply }}\n",
		"a list holding the reply":         "- " + strings.ReplaceAll(sameQuestion, "\n", "\n  "),
		"a comment, then another manifest": "# notes\n---\n" + configMap,
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "reply.yaml")
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, out, err := runAs(t, "alice", []client.Object{boundOpen()}, append(answer, "--to-file", path)...)
			if err == nil || !strings.Contains(err.Error(), "holds something other than a reply to question agents/deploy") {
				t.Errorf("got %v, want a refusal\n%s", err, out)
			}
			if data, _ := os.ReadFile(path); string(data) != content {
				t.Errorf("the file was changed:\n%s", data)
			}
			if _, out, err := runAs(t, "alice", []client.Object{boundOpen()}, append(answer, "--to-file", path, "--overwrite")...); err != nil {
				t.Fatalf("--overwrite: %v\n%s", err, out)
			}
			if r, _ := readReplyFile(t, path); r.Spec.QuestionRef.Name != "deploy" {
				t.Errorf("--overwrite wrote %+v", r)
			}
			if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o600 {
				t.Errorf("the replaced file's mode: %v, %v; want it kept, 0600", info.Mode(), err)
			}
		})
	}

	for name, content := range map[string]string{
		"an empty file":                            "",
		"a reply to the question, by hand":         sameQuestion,
		"a reply to the question, prepared":        "# an older header\n" + sameQuestion,
		"a reply to the question, a document":      "---\n" + sameQuestion,
		"a reply to the question, named otherwise": strings.Replace(sameQuestion, "name: r", "name: deploy-by-hand", 1),
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "reply.yaml")
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, out, err := runAs(t, "alice", []client.Object{boundOpen()}, append(answer, "--to-file", path)...); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if r, _ := readReplyFile(t, path); r.Name != stableReplyName("deploy", "alice") {
				t.Errorf("the file holds %+v", r)
			}
		})
	}
}

func TestReplyFileHeaderIsCommentWhateverTheAnswersHold(t *testing.T) {
	label := "ok\napiVersion: v1\nkind: Secret\r\nstringData: {x: y}"
	q := builders.Question("evil", "agents").Agent("bot").Ask("q", "Pick", label, "other").Ask("n", "Notes?").Obj()
	custom := "line one\nkind: Secret\rcarriage\u2028line\u2029para"
	path := filepath.Join(t.TempDir(), "reply.yaml")
	if _, out, err := runAs(t, "alice", []client.Object{q}, "answer", "evil", "--select", "q="+label, "--custom", "n="+custom, "--to-file", path); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	reply, file := readReplyFile(t, path)
	header(t, file)
	want := []hitlv1.AnswerItem{{ID: "q", Selected: []string{label}}, {ID: "n", Custom: custom}}
	if reply.Kind != "QuestionReply" || !reflect.DeepEqual(reply.Spec.Answers, want) {
		t.Errorf("the file reads back as %s %+v, want the answers %+v", reply.Kind, reply.Spec.Answers, want)
	}
	if !isReplyTo([]byte(file), q) {
		t.Errorf("the file is not one document, a reply to evil:\n%s", file)
	}

	// YAML reads a NEL back as a space: such an answer is refused rather
	// than committed changed.
	_, out, err := runAs(t, "alice", []client.Object{q}, "answer", "evil", "--custom", "n=a\u0085b", "--to-file", path)
	if err == nil || !strings.Contains(err.Error(), "does not read back") {
		t.Errorf("a custom text holding a NEL: got %v\n%s", err, out)
	}
	if got := string(comment("a\rb\u0085c\u2028d\u2029e\nf")); got != "# a\\rb\\u0085c\\u2028d\\u2029e\n# f\n" {
		t.Errorf("comment: %q", got)
	}
}

func TestReplyManifestFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--to-file", "r.yaml", "--dry-run=client"}, "--to-file writes the manifest that --dry-run=client prints"},
		{[]string{"--to-file", "r.yaml", "-o", "json"}, "--to-file writes YAML: -o json does not go with it"},
		{[]string{"--overwrite"}, "--overwrite goes with --to-file"},
	} {
		args := append([]string{"answer", "deploy", "--select", "env=prod"}, c.args...)
		if _, _, err := runWith(t, fixtures(), args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want %q", c.args, err, c.want)
		}
	}
	// Without --name, the manifest is named after the user: a user the
	// API server cannot name gets a clear error, not a random name.
	_, _, err := runWith(t, fixtures(), "answer", "deploy", "--select", "env=prod", "--to-file", "-")
	if err == nil || !strings.Contains(err.Error(), "naming the reply after you") || !strings.Contains(err.Error(), "--name") {
		t.Errorf("without a username: got %v", err)
	}
}

func TestWriteAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "new.yaml")
	if err := writeAtomic(path, []byte("a: 1\n")); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o644 {
		t.Errorf("a new file: %v, %v; want mode 0644", info.Mode(), err)
	}
	// A rename that fails (onto a directory that is not empty) leaves the
	// target as it was and no temporary file behind.
	target := filepath.Join(dir, "busy")
	if err := os.MkdirAll(filepath.Join(target, "inside"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeAtomic(target, []byte("a: 2\n")); err == nil {
		t.Error("writing over a directory succeeded")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("the directory holds %v, want new.yaml and busy alone", entries)
	}
}

// TestReplyFileRoundTrip prepares a reply file with `answer --to-file`
// against the local control plane, applies it as another identity (the
// GitOps engine), and checks that it settles the question as the engine,
// that the command refuses the settled question, and that the file does
// not answer a same-named question asked after it.
func TestReplyFileRoundTrip(t *testing.T) {
	k := startCluster(t)
	ns := newNamespace(t, k)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dana := "dana-" + ns
	config := kubeconfig(t, k, envtest.User{Name: dana, Groups: []string{"system:masters"}})
	ask := func() *hitlv1.UserQuestion {
		t.Helper()
		if err := k.Client.Create(ctx, builders.Question("deploy", ns).Agent("release-bot").
			Ask("env", "Where should I deploy?", "staging", "prod").Obj()); err != nil {
			t.Fatal(err)
		}
		var q *hitlv1.UserQuestion
		eventually(t, 30*time.Second, func() bool {
			var err error
			q, err = getQuestion(t, k, ns, "deploy")
			return err == nil && q.Status.SpecDigest != ""
		}, func() string { return "the controller wrote no spec digest" })
		return q
	}
	q := ask()

	path := filepath.Join(t.TempDir(), "deploy.yaml")
	if _, errOut, err := kubectlHitl(ctx, config, ns, "answer", "deploy", "--select", "env=prod", "--to-file", path); err != nil {
		t.Fatalf("answer --to-file: %v\n%s", err, errOut)
	}
	reply, _ := readReplyFile(t, path)
	if reply.Name != stableReplyName("deploy", dana) || reply.Spec.QuestionRef.UID != q.UID ||
		reply.Spec.QuestionRef.SpecDigest != q.Status.SpecDigest || reply.Spec.AnsweredBy != nil {
		t.Fatalf("the file holds %+v", reply)
	}
	applied := reply.DeepCopy()
	if err := k.Client.Create(ctx, applied); err != nil {
		t.Fatalf("applying the file: %v", err)
	}
	eventually(t, 30*time.Second, func() bool {
		q, _ = getQuestion(t, k, ns, "deploy")
		return q.Status.State == hitlv1.StateSettled
	}, func() string { return "the reply file did not settle the question" })
	s := q.Status.Settlement
	if s.Reply != reply.Name || s.AnsweredBy == nil || applied.Spec.AnsweredBy == nil ||
		s.AnsweredBy.Username != applied.Spec.AnsweredBy.Username || s.AnsweredBy.Username == dana {
		t.Errorf("settled by %+v; want the reply of the file, answered by whoever applied it", s)
	}
	if !reflect.DeepEqual(q.Status.Answers, reply.Spec.Answers) {
		t.Errorf("answers %+v, want the file's %+v", q.Status.Answers, reply.Spec.Answers)
	}

	_, _, err := kubectlHitl(ctx, config, ns, "answer", "deploy", "--select", "env=staging", "--to-file", path)
	if validation.CodeOf(err) != hitlv1.CodeNotAnswerable {
		t.Errorf("answer --to-file on the settled question: got %v, want NOT_ANSWERABLE", err)
	}

	// The file outlives its question; a new question of the same name
	// is not answered by it.
	if err := k.Client.Delete(ctx, q); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() bool {
		_, err := getQuestion(t, k, ns, "deploy")
		return apierrors.IsNotFound(err)
	}, func() string { return "the question was not deleted" })
	_ = k.Client.Delete(ctx, applied) // the garbage collector may not run in the local control plane
	eventually(t, 30*time.Second, func() bool {
		return apierrors.IsNotFound(k.Client.Get(ctx, client.ObjectKeyFromObject(applied), &hitlv1.QuestionReply{}))
	}, func() string { return "the applied reply was not deleted" })
	later := ask()
	stale := reply.DeepCopy()
	if err := k.Client.Create(ctx, stale); err != nil {
		if validation.CodeOf(err) != hitlv1.CodeNotAnswerable {
			t.Fatalf("applying the stale file: got %v, want NOT_ANSWERABLE", err)
		}
	} else {
		eventually(t, 30*time.Second, func() bool {
			_ = k.Client.Get(ctx, client.ObjectKeyFromObject(stale), stale)
			return stale.Status.Reason == hitlv1.CodeNotAnswerable
		}, func() string {
			return "the stale reply's status: " + string(stale.Status.Outcome) + " " + stale.Status.Message
		})
	}
	if q, _ := getQuestion(t, k, ns, "deploy"); q.UID != later.UID || q.Status.State == hitlv1.StateSettled {
		t.Errorf("the stale file answered the later question: %+v", q.Status)
	}
}
