// Package e2e drives the real binaries (localcp with the manager, kubectl
// and kubectl hitl, and a small Go agent built on pkg/agent) through every
// path of the specification's diagram. Run it with `make test-e2e`.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/hitl-dev/hitl/test/testenv"
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "hitl end-to-end suite")
}

var (
	binDir     string
	workDir    string
	kubeconfig string
	localcp    *exec.Cmd
)

var _ = BeforeSuite(func() {
	SetDefaultEventuallyTimeout(20 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	binDir = os.Getenv("HITL_BIN")
	if binDir == "" {
		binDir = filepath.Join(testenv.Root(), "bin")
	}
	for _, b := range []string{"manager", "kubectl-hitl", "localcp"} {
		_, err := os.Stat(filepath.Join(binDir, b))
		Expect(err).NotTo(HaveOccurred(), "run `make build` first (or `make test-e2e`)")
	}
	workDir = GinkgoT().TempDir()
	kubeconfig = filepath.Join(workDir, "kubeconfig")

	build := exec.Command("go", "build", "-o", filepath.Join(workDir, "agent"), "./test/e2e/agent")
	build.Dir = testenv.Root()
	out, err := build.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), string(out))

	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		Expect(os.Setenv("KUBEBUILDER_ASSETS", filepath.Join(testenv.Root(), "bin", "k8s"))).To(Succeed())
	}
	localcp = exec.Command(filepath.Join(binDir, "localcp"), "--write-kubeconfig", kubeconfig,
		"--manager", filepath.Join(binDir, "manager"), "--", "--metrics-bind-address=0", "--health-probe-bind-address=0")
	stdout, err := localcp.StdoutPipe()
	Expect(err).NotTo(HaveOccurred())
	localcp.Stderr = GinkgoWriter
	Expect(localcp.Start()).To(Succeed())
	ready := make(chan struct{})
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			fmt.Fprintln(GinkgoWriter, s.Text())
			if strings.Contains(s.Text(), "The manager runs") {
				close(ready)
			}
		}
	}()
	Eventually(ready, "90s").Should(BeClosed(), "the local control plane and the manager did not come up")
})

var _ = AfterSuite(func() {
	if localcp != nil && localcp.Process != nil {
		_ = localcp.Process.Signal(syscall.SIGTERM)
		_ = localcp.Wait()
	}
})

// run runs a command with the suite's kubeconfig and bin directory on PATH.
type run struct {
	stdout, stderr string
	code           int
}

func command(ctx context.Context, stdin string, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "PATH="+binDir+":"+os.Getenv("PATH"))
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	return cmd
}

func exe(stdin, name string, args ...string) run {
	GinkgoHelper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := command(ctx, stdin, name, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	r := run{stdout: out.String(), stderr: errOut.String()}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		r.code = exit.ExitCode()
	} else {
		Expect(err).NotTo(HaveOccurred())
	}
	fmt.Fprintf(GinkgoWriter, "$ %s %s\n%s%s(exit %d)\n", name, strings.Join(args, " "), r.stdout, r.stderr, r.code)
	return r
}

func kubectl(args ...string) run { GinkgoHelper(); return exe("", "kubectl", args...) }
func hitl(args ...string) run {
	GinkgoHelper()
	return exe("", "kubectl", append([]string{"hitl"}, args...)...)
}

// background starts a command and returns a function that waits for it.
func background(name string, args ...string) (*exec.Cmd, func() run) {
	GinkgoHelper()
	cmd := command(context.Background(), "", name, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	Expect(cmd.Start()).To(Succeed())
	return cmd, func() run {
		err := cmd.Wait()
		r := run{stdout: out.String(), stderr: errOut.String()}
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			r.code = exit.ExitCode()
		}
		fmt.Fprintf(GinkgoWriter, "$ %s %s (background)\n%s%s(exit %d)\n", name, strings.Join(args, " "), r.stdout, r.stderr, r.code)
		return r
	}
}

var nsCount int

func newNamespace() string {
	GinkgoHelper()
	nsCount++
	ns := fmt.Sprintf("e2e-%d-%d", GinkgoParallelProcess(), nsCount)
	Expect(kubectl("create", "namespace", ns).code).To(BeZero())
	return ns
}

func jsonpath(ns, resource, path string) func() string {
	return func() string { return kubectl("-n", ns, "get", resource, "-o", "jsonpath="+path).stdout }
}

func writeFile(name, content string) string {
	GinkgoHelper()
	p := filepath.Join(workDir, name)
	Expect(os.WriteFile(p, []byte(content), 0o644)).To(Succeed())
	return p
}
