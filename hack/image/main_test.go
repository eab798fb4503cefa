package main

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// goBuild builds a small program for linux/arch into dir/name, static
// unless cgo is true.
func goBuild(t *testing.T, dir, name, arch string, cgo bool) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "main.go")
	program := "package main\n\nfunc main() { println(\"" + name + "\") }\n"
	if cgo {
		program = "package main\n\n// #include <stdlib.h>\nimport \"C\"\n\nfunc main() { C.abs(1) }\n"
	}
	if err := os.WriteFile(src, []byte(program), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, src)
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+arch, "CGO_ENABLED=0", "GOFLAGS=")
	if cgo {
		cmd.Env = append(cmd.Env, "CGO_ENABLED=1")
	}
	if b, err := cmd.CombinedOutput(); err != nil {
		if cgo {
			t.Skipf("cannot build a cgo binary here: %v\n%s", err, b)
		}
		t.Fatalf("go build: %v\n%s", err, b)
	}
	return out
}

// TestArchiveLoadsBothWays builds an image of two binaries, writes the
// archive, and reads it back as docker reads it (manifest.json) and as an
// OCI layout (index.json), checking that both name the same image and that
// its config and files are what a Pod needs.
func TestArchiveLoadsBothWays(t *testing.T) {
	bins := t.TempDir()
	manager := goBuild(t, bins, "manager", "arm64", false)
	mcp := goBuild(t, bins, "hitl-mcp", "arm64", false)
	created := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	const ref = "ghcr.io/hitl-dev/hitl:v9.8.7"
	o := Options{
		Ref: ref, Arch: "arm64", Binaries: []string{manager, mcp}, Created: created,
		Labels: map[string]string{"org.opencontainers.image.revision": "abc123", "org.opencontainers.image.version": "v9.8.7"},
	}
	img, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "hitl-image.tar")
	f, err := os.Create(archive)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteArchive(f, img, tag); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	want, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}

	// docker load's way: manifest.json, the image found by its tag.
	docker, err := tarball.ImageFromPath(archive, &tag)
	if err != nil {
		t.Fatalf("reading manifest.json: %v", err)
	}
	// The docker view recomputes its manifest from the same config and
	// layers: same config, same layers.
	if got, _ := docker.ConfigName(); got != mustConfigName(t, img) {
		t.Errorf("manifest.json's config is %s, want %s", got, mustConfigName(t, img))
	}
	checkImage(t, "manifest.json", docker, o, [][]byte{readFile(t, manager), readFile(t, mcp)})

	// ctr's and podman's OCI way: index.json, with the name containerd
	// gives the image.
	dir := untar(t, archive)
	index, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("reading the OCI layout: %v", err)
	}
	im, err := index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("index.json lists %d manifests, want 1", len(im.Manifests))
	}
	d := im.Manifests[0]
	if d.Digest != want || d.MediaType != types.OCIManifestSchema1 {
		t.Errorf("index.json names %s (%s), want %s (%s)", d.Digest, d.MediaType, want, types.OCIManifestSchema1)
	}
	if got := d.Annotations["io.containerd.image.name"]; got != ref {
		t.Errorf("io.containerd.image.name is %q, want %q", got, ref)
	}
	if got := d.Annotations["org.opencontainers.image.ref.name"]; got != "v9.8.7" {
		t.Errorf("org.opencontainers.image.ref.name is %q, want v9.8.7", got)
	}
	if d.Platform == nil || d.Platform.Architecture != "arm64" || d.Platform.OS != "linux" {
		t.Errorf("index.json's platform is %v, want linux/arm64", d.Platform)
	}
	oci, err := index.Image(want)
	if err != nil {
		t.Fatal(err)
	}
	if mt, _ := oci.MediaType(); mt != types.OCIManifestSchema1 {
		t.Errorf("manifest media type %s, want %s", mt, types.OCIManifestSchema1)
	}
	checkImage(t, "index.json", oci, o, [][]byte{readFile(t, manager), readFile(t, mcp)})

	// The same inputs give the same image.
	again, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	if d2, _ := again.Digest(); d2 != want {
		t.Errorf("a second build has digest %s, the first %s: the build is not reproducible", d2, want)
	}
}

func checkImage(t *testing.T, via string, img v1.Image, o Options, binaries [][]byte) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatalf("%s: %v", via, err)
	}
	if cf.OS != "linux" || cf.Architecture != o.Arch {
		t.Errorf("%s: platform %s/%s, want linux/%s", via, cf.OS, cf.Architecture, o.Arch)
	}
	if cf.Config.User != "65532:65532" {
		t.Errorf("%s: user %q, want 65532:65532", via, cf.Config.User)
	}
	if got := strings.Join(cf.Config.Entrypoint, " "); got != "/manager" {
		t.Errorf("%s: entrypoint %q, want /manager", via, got)
	}
	if !cf.Created.Time.Equal(o.Created) {
		t.Errorf("%s: created %s, want %s", via, cf.Created.Time, o.Created)
	}
	for k, v := range map[string]string{
		"org.opencontainers.image.title":    "hitl",
		"org.opencontainers.image.version":  "v9.8.7",
		"org.opencontainers.image.revision": "abc123",
		"org.opencontainers.image.created":  "2026-12-03T10:00:00Z",
	} {
		if got, ok := cf.Config.Labels[k]; !ok || got != v {
			t.Errorf("%s: label %s is %q, want %q", via, k, got, v)
		}
	}
	if len(cf.RootFS.DiffIDs) != 2 || len(cf.History) != 2 {
		t.Errorf("%s: %d layers and %d history entries, want 2 and 2", via, len(cf.RootFS.DiffIDs), len(cf.History))
	}

	files := map[string]*tar.Header{}
	contents := map[string][]byte{}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: reading the file system: %v", via, err)
		}
		n := strings.TrimSuffix(strings.TrimPrefix(h.Name, "/"), "/")
		files[n] = h
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		contents[n] = b
	}
	for i, n := range []string{"manager", "hitl-mcp"} {
		h := files[n]
		if h == nil {
			t.Errorf("%s: no /%s", via, n)
			continue
		}
		if h.Mode&0o777 != 0o755 || h.Uid != 0 {
			t.Errorf("%s: /%s has mode %o owner %d, want 755 owned by root (not writable by the user)", via, n, h.Mode, h.Uid)
		}
		if !bytes.Equal(contents[n], binaries[i]) {
			t.Errorf("%s: /%s is not the binary built", via, n)
		}
	}
	if !strings.Contains(string(contents["etc/passwd"]), "nonroot:x:65532:65532:") {
		t.Errorf("%s: /etc/passwd lacks the user 65532: %q", via, contents["etc/passwd"])
	}
	if !strings.Contains(string(contents["etc/group"]), "nonroot:x:65532:") {
		t.Errorf("%s: /etc/group lacks the group 65532: %q", via, contents["etc/group"])
	}
	if h := files["tmp"]; h == nil || h.Typeflag != tar.TypeDir || h.Mode&0o7777 != 0o1777 {
		t.Errorf("%s: /tmp is not a sticky world-writable directory: %+v", via, h)
	}
	if h := files["home/nonroot"]; h == nil || h.Uid != 65532 || h.Typeflag != tar.TypeDir {
		t.Errorf("%s: /home/nonroot is not a directory of the user: %+v", via, h)
	}
	for n, h := range files {
		if !h.ModTime.Equal(o.Created) {
			t.Errorf("%s: /%s has time %s, not the creation time (the build would not be reproducible)", via, n, h.ModTime)
		}
	}
}

// TestRefusesWhatWouldNotRun feeds the builder what would fail in a Pod.
func TestRefusesWhatWouldNotRun(t *testing.T) {
	dir := t.TempDir()
	amd := goBuild(t, dir, "manager", "amd64", false)
	text := filepath.Join(dir, "script")
	if err := os.WriteFile(text, []byte("#!/bin/sh\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "manager")
	if err := os.WriteFile(other, readFile(t, amd), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		arch     string
		binaries []string
		want     string
	}{
		{"no binary", "amd64", nil, "no binaries"},
		{"another architecture", "arm64", []string{amd}, "is built for EM_X86_64, not arm64"},
		{"an unknown architecture", "riscv64", []string{amd}, `architecture "riscv64"`},
		{"a script", "amd64", []string{text}, "not a Linux binary"},
		{"two binaries of one name", "amd64", []string{amd, other}, "two binaries named manager"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Build(Options{Ref: "x/y:z", Arch: c.arch, Binaries: c.binaries})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error with %q", err, c.want)
			}
		})
	}
	t.Run("a dynamically linked binary", func(t *testing.T) {
		dyn := goBuild(t, t.TempDir(), "manager", "amd64", true)
		_, err := Build(Options{Ref: "x/y:z", Arch: "amd64", Binaries: []string{dyn}})
		if err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
			t.Errorf("got %v, want a refusal naming CGO_ENABLED=0", err)
		}
	})
}

func mustConfigName(t *testing.T, img v1.Image) v1.Hash {
	t.Helper()
	h, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// untar extracts the archive into a new directory.
func untar(t *testing.T, archive string) string {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return dir
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(p, dir+string(filepath.Separator)) {
			t.Fatalf("archive entry %q leaves the directory", h.Name)
		}
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
