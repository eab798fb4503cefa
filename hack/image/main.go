// Command image builds hitl's container image without a Docker daemon: the
// static binaries it is given on an empty base with a non-root user, written
// as one archive that `docker load`, `podman load`, `ctr images import` and
// `kind load image-archive` all read. It is the image the Dockerfile builds
// (same files, user, entrypoint and labels); `make image` runs it.
//
//	go run ./hack/image --image ghcr.io/hitl-dev/hitl:v0.1.0 --arch amd64 \
//	    --out bin/hitl-image.tar bin/image/linux-amd64/manager bin/image/linux-amd64/hitl-mcp
//
// The first binary is the entrypoint; every binary lands in / under its file
// name, so a Pod runs another one with `command: [/hitl-mcp]`.
//
// The archive holds an OCI image layout (oci-layout, index.json, blobs/)
// and, over the same blobs, the manifest.json that `docker save` writes:
// loaders that know only one of the two formats find theirs.
package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The user the image runs as: distroless's "nonroot", which the restricted
// Pod Security Standard accepts (runAsNonRoot with a numeric user).
const (
	userID   = 65532
	userName = "nonroot"
)

// Options are what the image is built from.
type Options struct {
	// Ref names the image, e.g. ghcr.io/hitl-dev/hitl:v0.1.0.
	Ref string
	// Arch is the GOARCH the binaries were built for.
	Arch string
	// Binaries are the paths of the static binaries; the first is the
	// entrypoint.
	Binaries []string
	// Created is the image's creation time, also every file's modification
	// time, so that the same inputs give the same digest.
	Created time.Time
	// Labels are added to the OCI labels the image always has.
	Labels map[string]string
}

func main() {
	var (
		o       Options
		out     = flag.String("out", "bin/hitl-image.tar", "the archive to write")
		version = flag.String("version", "", "org.opencontainers.image.version; empty takes the image reference's tag")
		rev     = flag.String("revision", "", "org.opencontainers.image.revision (the commit)")
		source  = flag.String("source", "https://github.com/hitl-dev/hitl", "org.opencontainers.image.source")
		created = flag.String("created", "", "creation time (RFC 3339 or Unix seconds); empty takes SOURCE_DATE_EPOCH, else the Unix epoch, so that builds are reproducible")
	)
	flag.StringVar(&o.Ref, "image", "ghcr.io/hitl-dev/hitl:dev", "the image reference the archive names")
	flag.StringVar(&o.Arch, "arch", "amd64", "GOARCH of the binaries (amd64 or arm64)")
	flag.Parse()
	o.Binaries = flag.Args()

	when := *created
	if when == "" {
		when = os.Getenv("SOURCE_DATE_EPOCH")
	}
	t, err := parseTime(when)
	if err != nil {
		fail(err)
	}
	o.Created = t
	ref, err := name.NewTag(o.Ref, name.StrictValidation)
	if err != nil {
		fail(fmt.Errorf("--image %q: %w", o.Ref, err))
	}
	o.Labels = map[string]string{"org.opencontainers.image.source": *source}
	o.Labels["org.opencontainers.image.version"] = ref.TagStr()
	if *version != "" {
		o.Labels["org.opencontainers.image.version"] = *version
	}
	if *rev != "" {
		o.Labels["org.opencontainers.image.revision"] = *rev
	}

	img, err := Build(o)
	if err != nil {
		fail(err)
	}
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		fail(err)
	}
	tmp := *out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		fail(err)
	}
	if err := WriteArchive(f, img, ref); err != nil {
		f.Close()
		fail(err)
	}
	if err := f.Close(); err != nil {
		fail(err)
	}
	if err := os.Rename(tmp, *out); err != nil {
		fail(err)
	}
	digest, _ := img.Digest()
	fmt.Printf("%s %s (%s) -> %s\n", ref.Name(), digest, o.Arch, *out)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "image:", err)
	os.Exit(1)
}

func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	if secs, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Unix(secs, 0).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("creation time %q is neither RFC 3339 nor Unix seconds", s)
	}
	return t.UTC(), nil
}

// elfMachines maps the architectures the image is built for to their ELF
// machine.
var elfMachines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// Build assembles the image: a base layer with the user and a writable /tmp,
// and a layer with the binaries.
func Build(o Options) (v1.Image, error) {
	if len(o.Binaries) == 0 {
		return nil, errors.New("no binaries: name at least the entrypoint")
	}
	names := map[string]bool{}
	var order []string
	for _, b := range o.Binaries {
		if err := checkStatic(b, o.Arch); err != nil {
			return nil, err
		}
		n := filepath.Base(b)
		if names[n] {
			return nil, fmt.Errorf("two binaries named %s", n)
		}
		names[n] = true
		order = append(order, "/"+n)
	}
	base, err := layerOf(o.Created, baseFiles())
	if err != nil {
		return nil, err
	}
	var bins []file
	for _, b := range o.Binaries {
		data, err := os.ReadFile(b)
		if err != nil {
			return nil, err
		}
		bins = append(bins, file{name: filepath.Base(b), mode: 0o755, data: data})
	}
	binaries, err := layerOf(o.Created, bins)
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	created := v1.Time{Time: o.Created}
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, MediaType: types.OCILayer, History: v1.History{
			Created: created, CreatedBy: "hack/image: /etc/passwd and /etc/group with user nonroot (65532), /home/nonroot, /tmp",
		}},
		mutate.Addendum{Layer: binaries, MediaType: types.OCILayer, History: v1.History{
			Created: created, CreatedBy: "hack/image: " + strings.Join(order, ", "),
		}},
	)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS, cf.Created = o.Arch, "linux", created
	labels := map[string]string{
		"org.opencontainers.image.title":       "hitl",
		"org.opencontainers.image.description": "hitl's manager, MCP server and web inbox: AI agents ask people structured questions through the Kubernetes API",
		"org.opencontainers.image.created":     o.Created.Format(time.RFC3339),
	}
	for k, v := range o.Labels {
		labels[k] = v
	}
	cf.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", userID, userID),
		Entrypoint: []string{"/" + filepath.Base(o.Binaries[0])},
		WorkingDir: "/",
		Env:        []string{"PATH=/"},
		Labels:     labels,
	}
	return mutate.ConfigFile(img, cf)
}

// checkStatic refuses what would not run on the empty base: a binary for
// another architecture, or one linked against a C library (built without
// CGO_ENABLED=0).
func checkStatic(path, arch string) error {
	machine, ok := elfMachines[arch]
	if !ok {
		return fmt.Errorf("architecture %q: want amd64 or arm64", arch)
	}
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s: not a Linux binary: %w", path, err)
	}
	defer f.Close()
	if f.Machine != machine {
		return fmt.Errorf("%s is built for %s, not %s", path, f.Machine, arch)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked (build it with CGO_ENABLED=0): the image has no C library", path)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		return fmt.Errorf("%s needs %v (build it with CGO_ENABLED=0): the image has no C library", path, libs)
	}
	return nil
}

// file is an entry of a layer; a name ending in / is a directory.
type file struct {
	name     string
	mode     int64
	uid, gid int
	data     []byte
}

func baseFiles() []file {
	u := strconv.Itoa(userID)
	return []file{
		{name: "etc/", mode: 0o755},
		{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\n" +
			userName + ":x:" + u + ":" + u + ":" + userName + ":/home/" + userName + ":/sbin/nologin\n")},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\n" + userName + ":x:" + u + ":\n")},
		{name: "home/", mode: 0o755},
		{name: "home/" + userName + "/", mode: 0o700, uid: userID, gid: userID},
		{name: "tmp/", mode: 0o1777},
	}
}

// layerOf writes files as a layer tarball with fixed owners and times.
func layerOf(modTime time.Time, files []file) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, Uid: f.uid, Gid: f.gid, ModTime: modTime, Format: tar.FormatPAX}
		if strings.HasSuffix(f.name, "/") {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// WriteArchive writes img, named ref, as an OCI image layout in a tar
// stream, with docker's manifest.json beside it over the same blobs.
func WriteArchive(w io.Writer, img v1.Image, ref name.Tag) error {
	tw := tar.NewWriter(w)
	put := func(path string, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: path, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	blob := func(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }

	manifest, err := img.RawManifest()
	if err != nil {
		return err
	}
	manifestDigest, err := img.Digest()
	if err != nil {
		return err
	}
	config, err := img.RawConfigFile()
	if err != nil {
		return err
	}
	configDigest, err := img.ConfigName()
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}

	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Name: d, Mode: 0o755, Typeflag: tar.TypeDir, Format: tar.FormatPAX}); err != nil {
			return err
		}
	}
	if err := put("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	index, err := json.Marshal(v1.IndexManifest{
		SchemaVersion: 2,
		MediaType:     types.OCIImageIndex,
		Manifests: []v1.Descriptor{{
			MediaType: types.OCIManifestSchema1,
			Digest:    manifestDigest,
			Size:      int64(len(manifest)),
			Platform:  &v1.Platform{OS: cf.OS, Architecture: cf.Architecture},
			Annotations: map[string]string{
				// containerd names the image it imports by the first;
				// the OCI layout's own reference is the tag.
				"io.containerd.image.name":          ref.Name(),
				"org.opencontainers.image.ref.name": ref.TagStr(),
			},
		}},
	})
	if err != nil {
		return err
	}
	if err := put("index.json", index); err != nil {
		return err
	}
	if err := put(blob(manifestDigest), manifest); err != nil {
		return err
	}
	if err := put(blob(configDigest), config); err != nil {
		return err
	}
	var layerPaths []string
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return err
		}
		size, err := l.Size()
		if err != nil {
			return err
		}
		rc, err := l.Compressed()
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: blob(d), Mode: 0o644, Size: size, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			rc.Close()
			return err
		}
		_, err = io.Copy(tw, rc)
		rc.Close()
		if err != nil {
			return err
		}
		layerPaths = append(layerPaths, blob(d))
	}
	dockerManifest, err := json.Marshal([]tarball.Descriptor{{
		Config:   blob(configDigest),
		RepoTags: []string{ref.Name()},
		Layers:   layerPaths,
	}})
	if err != nil {
		return err
	}
	if err := put("manifest.json", dockerManifest); err != nil {
		return err
	}
	return tw.Close()
}
