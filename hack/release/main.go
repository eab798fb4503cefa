// Command release writes what a hitl release publishes into one directory
// (dist/ by `make release`):
//
//   - install.yaml: config/default rendered as `kubectl apply -k` would, with
//     the image reference set, so `kubectl apply -f install.yaml` installs
//     hitl;
//   - kubectl-hitl_<os>_<arch>.tar.gz for linux and darwin on amd64 and
//     arm64, and checksums.txt (sha256sum's format);
//   - krew/hitl.yaml: the krew manifest of hack/krew/hitl.yaml.tmpl with
//     each archive's sha256.
//
// Every archive is built reproducibly (-trimpath, fixed file times), so the
// same commit gives the same sums.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/template"
	"time"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Platforms are the kubectl-hitl builds a release carries.
var Platforms = []struct{ OS, Arch string }{
	{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"},
}

// Archive is one kubectl-hitl archive written.
type Archive struct {
	OS, Arch, Name, SHA256 string
}

func main() {
	var (
		root    = flag.String("root", ".", "the repository's top directory")
		out     = flag.String("out", "dist", "the directory to write the release into")
		version = flag.String("version", "v0.1.0-dev", "the release version (semantic, with a leading v)")
		image   = flag.String("image", "", "the image the manifests run; empty means ghcr.io/hitl-dev/hitl:<version>")
		urlBase = flag.String("url-base", "", "where the archives are downloaded from; empty means the GitHub release of the version")
		created = flag.String("created", "", "the archives' file time in Unix seconds; empty takes SOURCE_DATE_EPOCH, else the Unix epoch")
	)
	flag.Parse()
	if !strings.HasPrefix(*version, "v") {
		fail(fmt.Errorf("--version %q: want a semantic version with a leading v", *version))
	}
	if *image == "" {
		*image = "ghcr.io/hitl-dev/hitl:" + *version
	}
	if *urlBase == "" {
		*urlBase = "https://github.com/hitl-dev/hitl/releases/download/" + *version
	}
	when := *created
	if when == "" {
		when = os.Getenv("SOURCE_DATE_EPOCH")
	}
	modTime := time.Unix(0, 0).UTC()
	if when != "" {
		var secs int64
		if _, err := fmt.Sscan(when, &secs); err != nil {
			fail(fmt.Errorf("creation time %q: want Unix seconds", when))
		}
		modTime = time.Unix(secs, 0).UTC()
	}
	if err := os.MkdirAll(filepath.Join(*out, "krew"), 0o755); err != nil {
		fail(err)
	}

	manifests, err := RenderInstall(filepath.Join(*root, "config"), "default", *image)
	if err != nil {
		fail(err)
	}
	header := fmt.Sprintf("# hitl %s: kubectl apply --server-side -f install.yaml\n# Rendered from config/default by `make release`; image %s.\n", *version, *image)
	if err := os.WriteFile(filepath.Join(*out, "install.yaml"), append([]byte(header), manifests...), 0o644); err != nil {
		fail(err)
	}
	fmt.Println(filepath.Join(*out, "install.yaml"))

	var archives []Archive
	var sums strings.Builder
	for _, p := range Platforms {
		a, err := buildArchive(*root, *out, p.OS, p.Arch, modTime)
		if err != nil {
			fail(err)
		}
		archives = append(archives, a)
		fmt.Fprintf(&sums, "%s  %s\n", a.SHA256, a.Name)
		fmt.Println(filepath.Join(*out, a.Name), a.SHA256)
	}
	if err := os.WriteFile(filepath.Join(*out, "checksums.txt"), []byte(sums.String()), 0o644); err != nil {
		fail(err)
	}
	krew, err := KrewManifest(filepath.Join(*root, "hack", "krew", "hitl.yaml.tmpl"), *version, *urlBase, archives)
	if err != nil {
		fail(err)
	}
	if err := os.WriteFile(filepath.Join(*out, "krew", "hitl.yaml"), krew, 0o644); err != nil {
		fail(err)
	}
	fmt.Println(filepath.Join(*out, "krew", "hitl.yaml"))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "release:", err)
	os.Exit(1)
}

// RenderInstall renders the kustomization config/<overlay> with every
// image of hitl (the manager's and the MCP server's) replaced by image, and
// returns the objects as one multi-document YAML stream. config is copied
// first, so the tree is never edited.
func RenderInstall(config, overlay, image string) ([]byte, error) {
	tmp, err := os.MkdirTemp("", "hitl-release-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, "config")
	if err := os.CopyFS(dir, os.DirFS(config)); err != nil {
		return nil, err
	}
	name, tag, digest := splitImage(image)
	entry := "  - name: " + HitlImage + "\n    newName: " + name + "\n"
	if digest != "" {
		entry += "    digest: " + digest + "\n"
	} else if tag != "" {
		entry += "    newTag: " + tag + "\n"
	}
	release := filepath.Join(dir, "release")
	if err := os.Mkdir(release, 0o755); err != nil {
		return nil, err
	}
	kustomization := "resources:\n  - ../" + overlay + "\nimages:\n" + entry
	if err := os.WriteFile(filepath.Join(release, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		return nil, err
	}
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), release)
	if err != nil {
		return nil, fmt.Errorf("rendering config/%s: %w", overlay, err)
	}
	// `kubectl apply -f install.yaml` creates the objects in file order: a
	// Namespace must come before the objects in it, and a CRD before any
	// object of its kind.
	var first, crds, rest [][]byte
	for _, r := range resources.Resources() {
		doc, err := r.AsYAML()
		if err != nil {
			return nil, err
		}
		switch r.GetKind() {
		case "Namespace":
			first = append(first, doc)
		case "CustomResourceDefinition":
			crds = append(crds, doc)
		default:
			rest = append(rest, doc)
		}
	}
	return bytes.Join(append(append(first, crds...), rest...), []byte("---\n")), nil
}

// HitlImage is the image name config/ gives hitl's containers (its
// kustomizations' images entries).
const HitlImage = "ghcr.io/hitl-dev/hitl"

// splitImage splits name[:tag][@digest]; a colon before the last slash is a
// registry's port, not a tag.
func splitImage(ref string) (name, tag, digest string) {
	name, digest, _ = strings.Cut(ref, "@")
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name, tag = name[:i], name[i+1:]
	}
	return name, tag, digest
}

// buildArchive cross-builds kubectl-hitl for goos/goarch and writes it as
// kubectl-hitl_<os>_<arch>.tar.gz into out.
func buildArchive(root, out, goos, goarch string, modTime time.Time) (Archive, error) {
	a := Archive{OS: goos, Arch: goarch, Name: fmt.Sprintf("kubectl-hitl_%s_%s.tar.gz", goos, goarch)}
	tmp, err := os.MkdirTemp("", "kubectl-hitl-")
	if err != nil {
		return a, err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "kubectl-hitl")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./cmd/kubectl-hitl")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return a, fmt.Errorf("building kubectl-hitl for %s/%s: %w", goos, goarch, err)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return a, err
	}
	archive, err := TarGz(modTime, map[string][]byte{"kubectl-hitl": data})
	if err != nil {
		return a, err
	}
	sum := sha256.Sum256(archive)
	a.SHA256 = hex.EncodeToString(sum[:])
	return a, os.WriteFile(filepath.Join(out, a.Name), archive, 0o644)
}

// TarGz writes the files (each executable) into a gzipped tarball with
// fixed owners and times, in name order.
func TarGz(modTime time.Time, files map[string][]byte) ([]byte, error) {
	var buf bytes.Buffer
	gz, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(gz)
	for _, n := range slices.Sorted(maps.Keys(files)) {
		h := &tar.Header{Name: n, Mode: 0o755, Size: int64(len(files[n])), ModTime: modTime, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(files[n]); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// KrewManifest fills the krew manifest template with the version, the
// download location and the archives' sums.
func KrewManifest(templatePath, version, urlBase string, archives []Archive) ([]byte, error) {
	t, err := template.New(filepath.Base(templatePath)).Option("missingkey=error").ParseFiles(templatePath)
	if err != nil {
		return nil, err
	}
	for _, a := range archives {
		if len(a.SHA256) != 64 || strings.Trim(a.SHA256, "0") == "" {
			return nil, fmt.Errorf("%s: no sha256", a.Name)
		}
	}
	var buf bytes.Buffer
	err = t.Execute(&buf, struct {
		Version, URLBase string
		Archives         []Archive
	}{version, strings.TrimSuffix(urlBase, "/"), archives})
	return buf.Bytes(), err
}
