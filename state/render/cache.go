package render

import "sync"

// Cache bounds. Entries are evicted at random when either is reached; the
// byte bound keeps a few huge templated manifests from pinning memory.
const (
	maxCacheEntries = 4096
	maxCacheBytes   = 64 << 20
)

// cacheEntry is a compiled template or the error compiling it gave; both
// depend only on the source text.
type cacheEntry struct {
	t   *template
	err error
}

// cache maps template source to its compiled form. It is safe for
// concurrent use; a compilation runs outside the lock, so two callers may
// both compile a new source, which is harmless.
type cache struct {
	mu sync.Mutex
	// guards the following fields
	entries map[string]cacheEntry
	bytes   int
}

func newCache() *cache {
	return &cache{entries: map[string]cacheEntry{}}
}

// get returns the compiled form of src, compiling it on a miss.
func (c *cache) get(src string) (*template, error) {
	c.mu.Lock()
	e, ok := c.entries[src]
	c.mu.Unlock()
	if ok {
		return e.t, e.err
	}
	t, err := compile(src)
	c.put(src, cacheEntry{t: t, err: err})
	return t, err
}

func (c *cache) put(src string, e cacheEntry) {
	if len(src) > maxCacheBytes/16 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[src]; ok {
		return
	}
	for k := range c.entries {
		if len(c.entries) < maxCacheEntries && c.bytes+len(src) <= maxCacheBytes {
			break
		}
		c.bytes -= len(k)
		delete(c.entries, k)
	}
	c.entries[src] = e
	c.bytes += len(src)
}

func (c *cache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
