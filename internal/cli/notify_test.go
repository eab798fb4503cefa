package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/internal/notify/channel"
	"github.com/hitl-dev/hitl/test/testenv"
)

// receiver is a webhook receiver that does what docs/notifications.md asks
// of one: it verifies each request's signature with its key, and answers
// 401 to a request it cannot verify. On /down it answers 503.
type receiver struct {
	key []byte

	mu       sync.Mutex
	verified []channel.Message
	refused  []string
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/down" {
		http.Error(w, "maintenance", http.StatusServiceUnavailable)
		return
	}
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if err := channel.Verify(rc.key, r.Header.Get(channel.SignatureHeader), body, time.Now(), channel.DefaultTolerance); err != nil {
		rc.refused = append(rc.refused, err.Error())
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var m channel.Message
	if err := json.Unmarshal(body, &m); err != nil || r.Header.Get(channel.EventHeader) != string(m.Event) || r.Header.Get(channel.DeliveryHeader) != m.ID {
		rc.refused = append(rc.refused, "a body or headers not of the schema")
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	rc.verified = append(rc.verified, m)
	w.WriteHeader(http.StatusNoContent)
}

// refusingSMTP is an SMTP server that greets, and refuses every recipient
// with 550; it returns its address.
func refusingSMTP(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				tp := textproto.NewConn(c)
				_ = tp.PrintfLine("220 test ESMTP")
				for {
					line, err := tp.ReadLine()
					if err != nil {
						return
					}
					switch verb := strings.ToUpper(strings.Fields(line + " x")[0]); verb {
					case "EHLO", "HELO", "MAIL", "RSET", "NOOP":
						_ = tp.PrintfLine("250 ok")
					case "RCPT":
						_ = tp.PrintfLine("550 5.1.1 no such mailbox here")
					case "QUIT":
						_ = tp.PrintfLine("221 bye")
						return
					default:
						_ = tp.PrintfLine("502 not here")
					}
				}
			}()
		}
	}()
	return l.Addr().String()
}

// platformUser is a user bound in ns to the shipped ClusterRole of file
// in config/rbac/examples (created once), or to rules (a Role of its own)
// when file is empty; it returns the user's kubeconfig.
func platformUser(t *testing.T, k *testenv.Cluster, ns, name, file string, rules []rbacv1.PolicyRule) string {
	t.Helper()
	ctx := context.Background()
	ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}
	if file != "" {
		data, err := os.ReadFile(filepath.Join(testenv.Root(), "config", "rbac", "examples", file))
		if err != nil {
			t.Fatal(err)
		}
		role := &rbacv1.ClusterRole{}
		if err := yaml.UnmarshalStrict(data, role); err != nil {
			t.Fatal(err)
		}
		if err := k.Client.Create(ctx, role); err != nil && !strings.Contains(err.Error(), "already exists") {
			t.Fatal(err)
		}
		ref = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name}
	} else {
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules}
		if err := k.Client.Create(ctx, role); err != nil {
			t.Fatal(err)
		}
	}
	subject := rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: name}
	b := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, RoleRef: ref, Subjects: []rbacv1.Subject{subject}}
	if err := k.Client.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := testenv.AwaitBinding(ctx, k.Client, ns, ref, b.Subjects, testenv.GrantWait); err != nil {
		t.Fatal(err)
	}
	return kubeconfig(t, k, envtest.User{Name: name})
}

// TestNotifyTest runs the built kubectl-hitl's `notify test` as a platform
// person bound to the shipped hitl-notification-admin role (and one with
// less) against channels of a real API server: a webhook whose receiver
// verifies the HMAC gets the test message and the command says it was
// delivered; each broken channel fails with exit status 1 and a message
// that names what is wrong.
func TestNotifyTest(t *testing.T) {
	k := startCluster(t)
	bin := plugin(t)
	ctx := context.Background()
	ns := newNamespace(t, k)
	rc := &receiver{key: []byte("0123456789abcdef0123456789abcdef")}
	hook := httptest.NewServer(rc)
	t.Cleanup(hook.Close)
	smtpAddr := refusingSMTP(t)

	secret := func(name string, data map[string]string) {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: data}
		if err := k.Client.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	newChannel := func(name string, spec hitlv1.NotificationChannelSpec) *hitlv1.NotificationChannel {
		ch := &hitlv1.NotificationChannel{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
		if err := k.Client.Create(ctx, ch); err != nil {
			t.Fatal(err)
		}
		return ch
	}
	webhook := func(url, secretName string) hitlv1.NotificationChannelSpec {
		return hitlv1.NotificationChannelSpec{Webhook: &hitlv1.WebhookChannel{URL: url, SecretRef: hitlv1.SecretKeyReference{Name: secretName}}}
	}
	secret("hook-key", map[string]string{"key": string(rc.key)})
	secret("other-key", map[string]string{"key": "not the receiver's key"})
	secret("no-key", map[string]string{"hmac": "misfiled"})
	const slackURL = "http://hooks.slack.invalid/services/T000/B000/XXXX"
	secret("slack-url", map[string]string{"url": slackURL})
	newChannel("audit", webhook(hook.URL+"/hook", "hook-key"))
	newChannel("wrong-key", webhook(hook.URL+"/hook", "other-key"))
	newChannel("down", webhook(hook.URL+"/down", "hook-key"))
	newChannel("no-key", webhook(hook.URL+"/hook", "no-key"))
	missing := newChannel("no-secret", webhook(hook.URL+"/hook", "absent"))
	newChannel("slack", hitlv1.NotificationChannelSpec{Slack: &hitlv1.ChatChannel{WebhookSecretRef: hitlv1.SecretKeyReference{Name: "slack-url"}}})
	newChannel("mail", hitlv1.NotificationChannelSpec{Email: &hitlv1.EmailChannel{Address: smtpAddr, From: "hitl@example.com",
		To: []string{"oncall@example.com"}, StartTLS: hitlv1.StartTLSDisabled}})
	// What hitl-notify would have written of the channel with no Secret.
	meta.SetStatusCondition(&missing.Status.Conditions, metav1.Condition{Type: hitlv1.ConditionReady, Status: metav1.ConditionFalse,
		Reason: hitlv1.ReasonSecretNotFound, Message: "Secret absent (spec.webhook.secretRef) does not exist in namespace " + ns})
	if err := k.Client.Status().Update(ctx, missing); err != nil {
		t.Fatal(err)
	}

	platform := platformUser(t, k, ns, "platform-"+ns, "hitl_notification_admin.yaml", nil)
	// May read channels but not Secrets.
	viewer := platformUser(t, k, ns, "viewer-"+ns, "", []rbacv1.PolicyRule{
		{APIGroups: []string{hitlv1.GroupVersion.Group}, Resources: []string{"notificationchannels"}, Verbs: []string{"get"}}})

	run := func(config string, args ...string) (stdout, stderr string, code int) {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--kubeconfig", config, "-n", ns, "notify", "test"}, args...)...)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return out.String(), errOut.String(), code
	}

	t.Run("delivered to a receiver that verifies the signature", func(t *testing.T) {
		out, errOut, code := run(platform, "audit")
		if code != 0 {
			t.Fatalf("exit status %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
		}
		for _, want := range []string{
			"Sending a test message to NotificationChannel " + ns + "/audit: a signed webhook POST to " + hook.URL + "/hook\n",
			"Delivered: a signed webhook POST to " + hook.URL + "/hook accepted the test message (delivery id test/" + ns + "/audit/",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("stdout lacks %q:\n%s", want, out)
			}
		}
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if len(rc.verified) != 1 {
			t.Fatalf("the receiver verified %d requests, want 1 (refused: %v)", len(rc.verified), rc.refused)
		}
		m := rc.verified[0]
		if m.Event != channel.EventTest || m.Version != channel.SchemaVersion || m.Link != "" || m.Settlement != nil {
			t.Errorf("the test message is %+v", m)
		}
		if len(m.Question.Items) != 1 || !strings.Contains(m.Question.Items[0].Question, "sent with kubectl hitl notify test by platform-"+ns) {
			t.Errorf("the test message's text is %+v", m.Question.Items)
		}
	})

	for _, c := range []struct {
		name, channel, config string
		// says is what stderr says (after "error: ").
		says []string
	}{
		{"an HMAC key the receiver does not share", "wrong-key", platform, []string{
			"error: NotificationChannel " + ns + "/wrong-key: not delivered: " + strings.TrimPrefix(hook.URL, "http://") + " answered 401 Unauthorized: bad signature\n"}},
		{"a receiver that is down", "down", platform, []string{
			"not delivered: " + strings.TrimPrefix(hook.URL, "http://") + " answered 503 Service Unavailable: maintenance (a failure hitl-notify retries"}},
		{"a missing Secret", "no-secret", platform, []string{
			"note: hitl-notify reports the channel not Ready (SecretNotFound)",
			"error: NotificationChannel " + ns + "/no-secret: SecretNotFound: Secret absent (spec.webhook.secretRef) does not exist in namespace " + ns + "\n"}},
		{"a Secret without its key", "no-key", platform, []string{
			"error: NotificationChannel " + ns + "/no-key: SecretKeyMissing: Secret no-key (spec.webhook.secretRef) has no key key, or it is empty\n"}},
		{"a chat webhook URL that is not https", "slack", platform, []string{
			"error: NotificationChannel " + ns + "/slack: BadURL: the webhook URL in Secret slack-url, key url (spec.slack.webhookSecretRef), is not an https URL\n"}},
		{"an SMTP server that refuses the recipient", "mail", platform, []string{
			"error: NotificationChannel " + ns + "/mail: not delivered: SMTP RCPT TO oncall@example.com: 550 ", "5.1.1 no such mailbox here"}},
		{"a channel that does not exist", "nope", platform, []string{
			"error: NotificationChannel nope does not exist in namespace " + ns + "\n"}},
		{"a person who may not read the Secret", "audit", viewer, []string{
			"error: NotificationChannel " + ns + "/audit: SecretForbidden: you may not read Secret hook-key (spec.webhook.secretRef) in namespace " + ns +
				": notify test reads the channel's Secrets as you and needs get on secrets there\n"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, code := run(c.config, c.channel)
			if code != 1 {
				t.Errorf("exit status %d, want 1\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
			for _, want := range c.says {
				if !strings.Contains(errOut, want) {
					t.Errorf("stderr lacks %q:\n%s", want, errOut)
				}
			}
			if strings.Contains(out+errOut, slackURL) || strings.Contains(out+errOut, "hooks.slack.invalid") {
				t.Errorf("the output shows the chat webhook's URL, a secret:\n%s%s", out, errOut)
			}
			if strings.Contains(out, "Delivered") {
				t.Errorf("stdout says delivered:\n%s", out)
			}
		})
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.verified) != 1 {
		t.Errorf("the receiver verified %d test messages, want only the first one's", len(rc.verified))
	}
}

// The delivery id of a test message differs each time, so that a receiver
// that drops ids it has seen takes every test.
func TestEachTestMessageHasItsOwnID(t *testing.T) {
	ch := &hitlv1.NotificationChannel{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "audit"}}
	a, b := testMessage(ch, "alice", t0), testMessage(ch, "alice", t0.Add(time.Nanosecond))
	if a.ID == b.ID {
		t.Errorf("two test messages share id %s", a.ID)
	}
	if a.Event != channel.EventTest || !a.Question.State.Terminal() || a.Link != "" {
		t.Errorf("a test message is %+v", a)
	}
}
