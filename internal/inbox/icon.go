package inbox

import (
	"bytes"
	"encoding/base64"
	"html/template"
	"strings"
)

// iconTypes are the media types an Approval subject's icon may have, each
// with a test of its first bytes: raster images only, since an SVG is a
// document that may carry script.
var iconTypes = map[string]func([]byte) bool{
	"image/png": func(b []byte) bool { return bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) },
	"image/gif": func(b []byte) bool {
		return bytes.HasPrefix(b, []byte("GIF87a")) || bytes.HasPrefix(b, []byte("GIF89a"))
	},
	"image/jpeg": func(b []byte) bool { return bytes.HasPrefix(b, []byte("\xff\xd8\xff")) },
	"image/webp": func(b []byte) bool {
		return len(b) >= 12 && bytes.Equal(b[:4], []byte("RIFF")) && bytes.Equal(b[8:12], []byte("WEBP"))
	},
}

// iconURL returns the source the page may show an Approval subject's icon
// from, or "" for none. Only an inline raster image is shown:
// data:image/(png|gif|jpeg|webp);base64,..., whose bytes must be of that
// type. A URL would be fetched by the browser of every person who opens
// the card, telling the agent (or whoever serves it) who looked and when.
// The result is re-encoded from the decoded bytes, so it holds nothing but
// base64 after its prefix.
func iconURL(icon string) template.URL {
	rest, ok := strings.CutPrefix(icon, "data:")
	if !ok {
		return ""
	}
	meta, data, ok := strings.Cut(rest, ",")
	if !ok {
		return ""
	}
	mediaType, ok := strings.CutSuffix(meta, ";base64")
	if !ok {
		return ""
	}
	is, ok := iconTypes[mediaType]
	if !ok {
		return ""
	}
	img, err := base64.StdEncoding.DecodeString(data)
	if err != nil || !is(img) {
		return ""
	}
	return template.URL("data:" + mediaType + ";base64," + base64.StdEncoding.EncodeToString(img)) //nolint:gosec // a checked raster image, base64
}
