package mcp

// CachedReviews is how many token review outcomes h remembers: accepted
// tokens and refused ones.
func (h *HTTPServer) CachedReviews() (accepted, refused int) {
	return len(h.reviewer.accepted.Keys()), len(h.reviewer.refused.Keys())
}

// Sessions is how many MCP sessions h has open.
func (h *HTTPServer) Sessions() int {
	n := 0
	for range h.mcp.Sessions() {
		n++
	}
	return n
}
