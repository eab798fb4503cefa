package browser

import (
	"bufio"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	. "github.com/onsi/gomega"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/internal/cli"
	. "github.com/hitl-dev/hitl/test/builders"
)

// kubectl hitl inbox --web itself: the printed URL opens the inbox once,
// as the kubeconfig's user.
func TestKubectlHitlInboxWeb(t *testing.T) {
	e := newEnv(t)
	u, err := e.k.Env.AddUser(envtest.User{Name: e.person}, e.k.Config)
	e.g.Expect(err).NotTo(HaveOccurred())
	kc, err := u.KubeConfig()
	e.g.Expect(err).NotTo(HaveOccurred())
	path := filepath.Join(t.TempDir(), "kubeconfig")
	e.g.Expect(os.WriteFile(path, kc, 0o600)).To(Succeed())

	ctx, cancel := context.WithCancel(e.ctx)
	outR, outW := io.Pipe()
	cmd := cli.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: outW, ErrOut: io.Discard})
	cmd.SetArgs([]string{"inbox", "--web", "--kubeconfig", path, "-n", e.ns, "--agent", agentName})
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx); _ = outW.Close() }()
	t.Cleanup(cancel)
	line, err := bufio.NewReader(outR).ReadString('\n')
	e.g.Expect(err).NotTo(HaveOccurred())
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "Open ")
	e.g.Expect(ok).To(BeTrue(), line)
	e.g.Expect(url).To(MatchRegexp(`^http://127\.0\.0\.1:\d+/\?token=[A-Za-z0-9_-]{43}$`))

	e.ask(Question("cli", e.ns).Ask("env", "Where should I deploy?", "staging", "production").Obj())
	tab := e.tab("", false)
	e.do(tab, chromedp.Navigate(url), chromedp.WaitVisible(card("cli")))
	e.g.Expect(e.text(tab, `[data-user]`)).To(Equal(e.person), "the kubeconfig's user, as the API server names it")
	e.do(tab, chromedp.Click(card("cli", `[data-action="toggle"]`)), chromedp.Click(card("cli", `input[value="staging"]`)),
		chromedp.Click(card("cli", `button.primary`)), chromedp.WaitVisible(card("cli", ".outcome-applied")))
	e.answered("cli", hitlv1.AnswerItem{ID: "env", Selected: []string{"staging"}})

	other := e.tab("", false)
	e.do(other, chromedp.Navigate(url))
	e.g.Expect(e.text(other, `body`)).To(HavePrefix("401 Unauthorized"), "the token works once")

	cancel()
	e.g.Eventually(done, 10*time.Second).Should(Receive(BeNil()), "Ctrl-C stops the inbox")
}
