package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

const configDir = "../../config"

// TestInstallRunsTheReleaseImage renders install.yaml for an image and
// checks that every container runs it, and that nothing else differs from
// what `kubectl apply -k config/default` installs.
func TestInstallRunsTheReleaseImage(t *testing.T) {
	for _, image := range []string{
		"ghcr.io/hitl-dev/hitl:v1.2.3",
		"registry.local:5000/team/hitl:rc1",
		"ghcr.io/hitl-dev/hitl@sha256:" + strings.Repeat("ab", 32),
	} {
		t.Run(image, func(t *testing.T) {
			out, err := RenderInstall(configDir, "default", image)
			if err != nil {
				t.Fatal(err)
			}
			got := decode(t, out)
			want := kustomizeBuild(t, filepath.Join(configDir, "default"))
			if len(got) != len(want) {
				t.Fatalf("install.yaml has %d objects, config/default %d", len(got), len(want))
			}
			key := func(o *unstructured.Unstructured) string {
				return o.GetKind() + "/" + o.GetNamespace() + "/" + o.GetName()
			}
			wanted := map[string]*unstructured.Unstructured{}
			for _, o := range want {
				wanted[key(o)] = o
			}
			// kubectl apply -f creates in file order: a Namespace before
			// the objects in it, a CRD before objects of its kind.
			seen := map[string]bool{}
			for _, o := range got {
				if ns := o.GetNamespace(); ns != "" && !seen["Namespace//"+ns] && wanted["Namespace//"+ns] != nil {
					t.Errorf("%s comes before its Namespace %s", key(o), ns)
				}
				if o.GetKind() != "CustomResourceDefinition" && strings.Contains(o.GetAPIVersion(), "hitl.dev") {
					for k, w := range wanted {
						if w.GetKind() == "CustomResourceDefinition" && !seen[k] {
							t.Errorf("%s comes before CRD %s", key(o), w.GetName())
						}
					}
				}
				seen[key(o)] = true
			}
			containers := 0
			for _, o := range got {
				w := wanted[key(o)]
				if w == nil {
					t.Fatalf("%s is not in config/default", key(o))
				}
				if o.GetKind() == "Deployment" {
					list, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
					for _, c := range list {
						containers++
						if img := c.(map[string]any)["image"]; img != image {
							t.Errorf("%s: container image %v, want %s", o.GetName(), img, image)
						}
						c.(map[string]any)["image"] = "X"
					}
					wl, _, _ := unstructured.NestedSlice(w.Object, "spec", "template", "spec", "containers")
					for _, c := range wl {
						c.(map[string]any)["image"] = "X"
					}
					_ = unstructured.SetNestedSlice(o.Object, list, "spec", "template", "spec", "containers")
					_ = unstructured.SetNestedSlice(w.Object, wl, "spec", "template", "spec", "containers")
				}
				a, _ := yaml.Marshal(o.Object)
				b, _ := yaml.Marshal(w.Object)
				if !bytes.Equal(a, b) {
					t.Errorf("%s differs from config/default's beyond the image:\n%s\nwant\n%s", key(o), a, b)
				}
			}
			if containers == 0 {
				t.Fatal("install.yaml runs no container")
			}
		})
	}
}

func TestSplitImage(t *testing.T) {
	for ref, want := range map[string][3]string{
		"ghcr.io/hitl-dev/hitl:v1":           {"ghcr.io/hitl-dev/hitl", "v1", ""},
		"localhost:5000/hitl":                {"localhost:5000/hitl", "", ""},
		"localhost:5000/hitl:dev":            {"localhost:5000/hitl", "dev", ""},
		"hitl@sha256:00":                     {"hitl", "", "sha256:00"},
		"ghcr.io/hitl-dev/hitl:v1@sha256:00": {"ghcr.io/hitl-dev/hitl", "v1", "sha256:00"},
	} {
		n, tag, d := splitImage(ref)
		if [3]string{n, tag, d} != want {
			t.Errorf("splitImage(%q) = %q %q %q, want %q", ref, n, tag, d, want)
		}
	}
}

// TestKrewManifest fills the repository's template and reads the result as
// krew would: every platform of the release, each with its archive's URL
// and sum.
func TestKrewManifest(t *testing.T) {
	var archives []Archive
	for i, p := range Platforms {
		archives = append(archives, Archive{OS: p.OS, Arch: p.Arch, Name: "kubectl-hitl_" + p.OS + "_" + p.Arch + ".tar.gz",
			SHA256: strings.Repeat(string(rune('a'+i)), 64)})
	}
	out, err := KrewManifest("../krew/hitl.yaml.tmpl", "v1.2.3", "https://example.com/dl/", archives)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			Version          string `json:"version"`
			Homepage         string `json:"homepage"`
			ShortDescription string `json:"shortDescription"`
			Description      string `json:"description"`
			Platforms        []struct {
				Selector struct {
					MatchLabels map[string]string `json:"matchLabels"`
				} `json:"selector"`
				URI    string `json:"uri"`
				SHA256 string `json:"sha256"`
				Bin    string `json:"bin"`
			} `json:"platforms"`
		} `json:"spec"`
	}
	if err := yaml.UnmarshalStrict(out, &m); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if m.Kind != "Plugin" || m.Metadata.Name != "hitl" || m.Spec.Version != "v1.2.3" {
		t.Errorf("kind %s name %s version %s", m.Kind, m.Metadata.Name, m.Spec.Version)
	}
	if len(m.Spec.Platforms) != len(archives) {
		t.Fatalf("%d platforms, want %d", len(m.Spec.Platforms), len(archives))
	}
	for i, p := range m.Spec.Platforms {
		a := archives[i]
		if p.Selector.MatchLabels["os"] != a.OS || p.Selector.MatchLabels["arch"] != a.Arch {
			t.Errorf("platform %d selects %v, want %s/%s", i, p.Selector.MatchLabels, a.OS, a.Arch)
		}
		if p.URI != "https://example.com/dl/"+a.Name || p.SHA256 != a.SHA256 || p.Bin != "kubectl-hitl" {
			t.Errorf("platform %d: %s %s %s", i, p.URI, p.SHA256, p.Bin)
		}
	}

	// A manifest is never written with a missing or all-zero sum.
	for _, sum := range []string{"", strings.Repeat("0", 64), "abc"} {
		bad := append([]Archive(nil), archives...)
		bad[2].SHA256 = sum
		if _, err := KrewManifest("../krew/hitl.yaml.tmpl", "v1.2.3", "https://example.com", bad); err == nil {
			t.Errorf("sum %q accepted", sum)
		}
	}
}

// TestTarGzIsReproducible: the same files give the same bytes, and the
// archive holds them executable under their names.
func TestTarGzIsReproducible(t *testing.T) {
	files := map[string][]byte{"kubectl-hitl": []byte("binary"), "LICENSE": []byte("text")}
	when := time.Unix(1700000000, 0)
	a, err := TarGz(when, files)
	if err != nil {
		t.Fatal(err)
	}
	b, err := TarGz(when, files)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Error("two archives of the same files differ")
	}
	gz, err := gzip.NewReader(bytes.NewReader(a))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		if !bytes.Equal(data, files[h.Name]) || h.Mode != 0o755 || !h.ModTime.Equal(when) {
			t.Errorf("%s: %q mode %o time %s", h.Name, data, h.Mode, h.ModTime)
		}
		names = append(names, h.Name)
	}
	if strings.Join(names, ",") != "LICENSE,kubectl-hitl" {
		t.Errorf("entries %v, want LICENSE,kubectl-hitl in order", names)
	}
}

func decode(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		var o unstructured.Unstructured
		if err := d.Decode(&o.Object); err == io.EOF {
			return out
		} else if err != nil {
			t.Fatal(err)
		}
		if len(o.Object) > 0 {
			out = append(out, &o)
		}
	}
}

func kustomizeBuild(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatal(err)
	}
	data, err := res.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, data)
}
