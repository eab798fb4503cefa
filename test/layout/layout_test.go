// Package layout checks that the repository keeps the layout docs/layout.md
// describes: imports point only down the layers, pkg/ holds only the SDKs,
// and the rules that several components apply have one home.
package layout

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/hitl-dev/hitl/"

// layers are the repository's packages from the bottom up, by path
// prefix. A package may import the packages of a lower layer and those of
// its own group; never a higher layer's, nor another group's of its layer.
var layers = [][]string{
	{"api/"},
	{"internal/rewatch", "internal/access", "internal/controlplane", "internal/kubeclient"},
	{"internal/follow"},
	{"pkg/", "controllers/claimreads", "controllers/closer", "controllers/eventbudget", "controllers/provenance"},
	{"controllers/userquestion", "internal/admission", "internal/inbox", "internal/mcp", "internal/notify"},
	{"internal/cli"},
	// The manager's wiring is the one package of internal/ that imports
	// controllers/.
	{"internal/manager"}, // and internal/manager/local, which runs it in process
	{"cmd/", "hack/", "test/"},
}

// place returns the layer and the group (prefix) of a package of the
// module, relative to the module's path.
func place(t *testing.T, pkg string) (int, string) {
	t.Helper()
	for i, groups := range layers {
		for _, g := range groups {
			if pkg+"/" == g || strings.HasPrefix(pkg, strings.TrimSuffix(g, "/")+"/") || pkg == strings.TrimSuffix(g, "/") {
				return i, g
			}
		}
	}
	t.Fatalf("package %s has no layer: add it to layers (and to docs/layout.md)", pkg)
	return 0, ""
}

type listed struct {
	ImportPath string
	Imports    []string
	GoFiles    []string
	Dir        string
}

// packages lists the module's packages with their non-test imports.
func packages(t *testing.T) []listed {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", module+"...")
	cmd.Dir = root(t)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []listed
	dec := json.NewDecoder(&out)
	for {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages; the module has more", len(pkgs))
	}
	return pkgs
}

func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestImportsPointDown(t *testing.T) {
	for _, p := range packages(t) {
		from := strings.TrimPrefix(p.ImportPath, module)
		layer, group := place(t, from)
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			to := strings.TrimPrefix(imp, module)
			toLayer, toGroup := place(t, to)
			if toLayer > layer || (toLayer == layer && toGroup != group) {
				t.Errorf("%s imports %s: an import from layer %d (%s) to layer %d (%s) points up or across", from, to, layer, group, toLayer, toGroup)
			}
		}
	}
}

func TestPkgHoldsOnlyTheSDKs(t *testing.T) {
	var public []string
	for _, p := range packages(t) {
		if rel := strings.TrimPrefix(p.ImportPath, module); strings.HasPrefix(rel, "pkg/") {
			public = append(public, rel)
		}
	}
	// pkg/sealed is the SDKs' own: an agent that keeps its sealing key
	// holds a sealed.Key.
	if want := []string{"pkg/agent", "pkg/answerer", "pkg/sealed"}; !slices.Equal(public, want) {
		t.Errorf("pkg/ holds %v, want only the SDKs %v: what users' programs do not import belongs in internal/", public, want)
	}
}

// TestOneHomePerRule finds, in the non-test code, each rule that must be
// written once: the scheme's construction and whether a question may be
// answered.
func TestOneHomePerRule(t *testing.T) {
	rules := []struct {
		what string
		re   *regexp.Regexp
		home string
		// times is how often the home holds it.
		times int
	}{
		{"a runtime scheme is built", regexp.MustCompile(`runtime\.NewScheme\(\)`), "api/v1alpha1/scheme.go", 1},
		// Answerable and Unanswerable.
		{"a rule of answerability is defined", regexp.MustCompile(`func (\([^)]*\) )?(?i:(un)?answerable)\(`), "api/v1alpha1/rules.go", 2},
	}
	for _, rule := range rules {
		var found []string
		for _, p := range packages(t) {
			for _, f := range p.GoFiles {
				path := filepath.Join(p.Dir, f)
				src, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				rel, _ := filepath.Rel(root(t), path)
				for range rule.re.FindAll(src, -1) {
					found = append(found, rel)
				}
			}
		}
		at := 0
		for _, f := range found {
			if f != rule.home {
				t.Errorf("%s in %s: only %s may", rule.what, f, rule.home)
			} else {
				at++
			}
		}
		if at != rule.times {
			t.Errorf("%s %d times in %s, want %d: the check is out of date", rule.what, at, rule.home, rule.times)
		}
	}
}

// TestBinariesLinkNoTestCode checks that the shipped binaries link neither
// a test framework nor envtest and the local control plane.
func TestBinariesLinkNoTestCode(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "./cmd/...")
	cmd.Dir = root(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, module+"controllers/userquestion") {
		t.Fatalf("go list -deps ./cmd/... does not list the controller: %.200s", out)
	}
	for _, d := range deps {
		for _, banned := range []string{"github.com/onsi/", "sigs.k8s.io/controller-runtime/pkg/envtest", module + "internal/controlplane", module + "test/"} {
			if strings.HasPrefix(d, banned) {
				t.Errorf("a binary under cmd/ links %s", d)
			}
		}
	}
}
