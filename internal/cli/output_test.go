package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/test/builders"
)

// The output formats are pure functions of the objects read, so these
// tests read the fixtures from controller-runtime's fake client; the
// commands run as the binary runs them (flags parsed by cobra), with the
// client already made.

// runWith runs kubectl hitl with args against a fake cluster holding objs,
// in namespace "agents", at t0 + 30 s.
func runWith(t *testing.T, objs []client.Object, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	defer func(f func() time.Time) { nowFunc = f }(nowFunc)
	nowFunc = func() time.Time { return t0.Add(30 * time.Second) }
	var out, errOut bytes.Buffer
	streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
	c := fake.NewClientBuilder().WithScheme(scheme()).WithObjects(objs...).Build()
	cmd := newRootCommand(&common{flags: genericclioptions.NewConfigFlags(true), streams: streams, client: c, namespace: "agents"})
	cmd.SetArgs(args)
	err = cmd.Execute()
	return out.String(), errOut.String(), err
}

func fixtures() []client.Object {
	early := at(builders.Question("first", "agents").Agent("bot").Ask("q", "Q?").Obj(), t0.Add(-time.Hour))
	gone := at(builders.Question("gone", "agents").Agent("bot").Ask("q", "Q?").Obj(), t0.Add(-3*time.Hour))
	gone.Status.State = hitlv1.StateCancelled
	return []client.Object{settledLate(), timedOpen(), continuedQueued(), early, gone}
}

func TestListOutputFormats(t *testing.T) {
	for _, c := range []struct{ golden, output string }{
		{"list-human.golden", ""},
		{"list-wide.golden", "wide"},
		{"list-json.golden", "json"},
		{"list-yaml.golden", "yaml"},
		{"list-name.golden", "name"},
		{"list-jsonpath.golden", "jsonpath={.items[*].metadata.name}"},
		{"list-jsonpath-as-json.golden", "jsonpath-as-json={.items[*].status.state}"},
		{"list-go-template.golden", `go-template={{range .items}}{{.metadata.name}} {{.spec.agent}}{{"\n"}}{{end}}`},
		{"list-custom-columns.golden", "custom-columns=NAME:.metadata.name,AGENT:.spec.agent,STATE:.status.state,ANSWERED BY:.status.settlement.answeredBy.username"},
	} {
		t.Run(c.golden, func(t *testing.T) {
			args := []string{"list"}
			if c.output != "" {
				args = append(args, "-o", c.output)
			}
			out, errOut, err := runWith(t, fixtures(), args...)
			if err != nil {
				t.Fatalf("%v\n%s", err, errOut)
			}
			golden(t, c.golden, out)
		})
	}
}

func TestListMachineFormatsAreKubectlsObjects(t *testing.T) {
	out, _, err := runWith(t, fixtures(), "list", "--state", "Settled", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var list hitlv1.UserQuestionList
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	if list.Kind != "UserQuestionList" || list.APIVersion != "hitl.dev/v1alpha1" || len(list.Items) != 1 ||
		list.Items[0].Name != "lunch" || list.Items[0].Kind != "UserQuestion" {
		t.Errorf("list -o json --state Settled = %s", out)
	}
	for _, q := range list.Items {
		if len(q.ManagedFields) > 0 {
			t.Error("managedFields printed without --show-managed-fields")
		}
	}

	out, _, err = runWith(t, fixtures(), "list", "--no-headers", "-o", "custom-columns=NAME:.metadata.name")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "NAME") || len(strings.Fields(out)) != 5 {
		t.Errorf("--no-headers with custom-columns printed:\n%s", out)
	}

	for _, bad := range []string{"xml", "custom-columns=", "jsonpath={.items[", "wide=1"} {
		if _, _, err := runWith(t, fixtures(), "list", "-o", bad); err == nil {
			t.Errorf("-o %s was accepted", bad)
		}
	}
}

func TestShowOutputFormats(t *testing.T) {
	for _, c := range []struct{ golden, output string }{
		{"show-json.golden", "json"},
		{"show-yaml.golden", "yaml"},
		{"show-name.golden", "name"},
		{"show-jsonpath.golden", "jsonpath={.status.state} {.status.deadline}"},
		{"show-jsonpath-as-json.golden", "jsonpath-as-json={.spec.questions[*].id}"},
		{"show-go-template.golden", "go-template={{.metadata.name}}: {{len .spec.questions}} questions"},
		{"show-custom-columns.golden", "custom-columns=NAME:.metadata.name,CLAIMED BY:.status.claims[*].holder"},
	} {
		t.Run(c.golden, func(t *testing.T) {
			out, errOut, err := runWith(t, fixtures(), "show", "deploy", "-o", c.output)
			if err != nil {
				t.Fatalf("%v\n%s", err, errOut)
			}
			golden(t, c.golden, out)
		})
	}
	// The card stays the default (card-*.golden hold it).
	out, _, err := runWith(t, fixtures(), "show", "deploy")
	if err != nil || !strings.Contains(out, "agents/deploy  agent release-bot  Open") {
		t.Errorf("show without -o: %v\n%s", err, out)
	}
	if _, _, err := runWith(t, fixtures(), "show", "deploy", "-o", "wide"); err == nil {
		t.Error("show -o wide was accepted; show has no wide form")
	}
}

func TestAnswerDryRunOutputFormats(t *testing.T) {
	for _, c := range []struct{ golden, output string }{
		{"answer-dry-run-default.golden", ""},
		{"answer-dry-run-yaml.golden", "yaml"},
		{"answer-dry-run-json.golden", "json"},
		{"answer-dry-run-name.golden", "name"},
		{"answer-dry-run-jsonpath.golden", "jsonpath={.spec.answers[*].selected[*]}"},
		{"answer-dry-run-go-template.golden", "go-template={{range .spec.answers}}{{.id}}={{.selected}}{{.custom}};{{end}}"},
		{"answer-dry-run-custom-columns.golden", "custom-columns=REPLY:.metadata.name,QUESTION:.spec.questionRef.name"},
	} {
		t.Run(c.golden, func(t *testing.T) {
			args := []string{"answer", "deploy", "--select", "env=prod", "--custom", "notes=ship it", "--name", "deploy-gitops", "--dry-run=client"}
			if c.output != "" {
				args = append(args, "-o", c.output)
			}
			out, errOut, err := runWith(t, fixtures(), args...)
			if err != nil {
				t.Fatalf("%v\n%s", err, errOut)
			}
			golden(t, c.golden, out)
		})
	}
	// What --dry-run prints is a reply the API server takes as it is.
	out, _, err := runWith(t, fixtures(), "answer", "deploy", "--select", "env=prod", "--skip", "notes", "--name", "r", "--dry-run=client")
	if err != nil {
		t.Fatal(err)
	}
	var reply hitlv1.QuestionReply
	if err := yaml.UnmarshalStrict([]byte(out), &reply); err != nil {
		t.Fatalf("the manifest does not read back: %v\n%s", err, out)
	}
	if reply.Kind != "QuestionReply" || reply.Spec.QuestionRef.Name != "deploy" || reply.Namespace != "agents" || len(reply.Spec.Answers) != 2 {
		t.Errorf("manifest %+v", reply)
	}
}
