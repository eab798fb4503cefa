package main

import (
	"os/exec"
	"strings"
	"testing"
)

// localcp is a tool that people run (`make run`), not a test: it must not
// carry a test framework. The local control plane's start-up it shares with
// the suites lives in internal/controlplane for that reason; a test package
// imported by mistake would bring Ginkgo and Gomega back.
func TestLinksNoTestFramework(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is not on PATH: %v", err)
	}
	out, err := exec.Command(goCmd, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 100 {
		t.Fatalf("go list -deps listed %d packages; want localcp's whole import graph", len(deps))
	}
	var hitl bool
	for _, p := range deps {
		for _, banned := range []string{"github.com/onsi/", "/test/testenv", "github.com/stretchr/testify"} {
			if strings.Contains(p, banned) {
				t.Errorf("localcp links %s", p)
			}
		}
		if p == "testing" {
			t.Error("localcp links the testing package")
		}
		if p == "github.com/hitl-dev/hitl/internal/controlplane" {
			hitl = true
		}
	}
	if !hitl {
		t.Error("localcp does not link internal/controlplane; the check is not looking at the right graph")
	}
}
