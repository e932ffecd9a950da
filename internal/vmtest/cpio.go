package vmtest

import (
	"fmt"
	"io"
	"os"
	"path"
	"strings"
)

// cpioWriter writes a "newc" cpio archive, the format the kernel unpacks as
// an initramfs. Parent directories are created on demand; an entry written
// twice keeps the first copy (the later one is skipped).
type cpioWriter struct {
	w    io.Writer
	ino  uint32
	seen map[string]bool
	err  error
}

func newCPIO(w io.Writer) *cpioWriter {
	return &cpioWriter{w: w, ino: 1, seen: map[string]bool{"": true, ".": true, "/": true}}
}

const (
	modeDir  = 0o040000
	modeFile = 0o100000
	modeLink = 0o120000
)

// Dir adds a directory (and its parents).
func (c *cpioWriter) Dir(name string, perm uint32) {
	name = clean(name)
	if c.seen[name] {
		return
	}
	c.Dir(path.Dir(name), 0o755)
	c.seen[name] = true
	c.header(name, modeDir|perm, 0)
}

// Symlink adds a symbolic link name -> target.
func (c *cpioWriter) Symlink(name, target string) {
	name = clean(name)
	if c.seen[name] {
		return
	}
	c.Dir(path.Dir(name), 0o755)
	c.seen[name] = true
	c.header(name, modeLink|0o777, len(target))
	c.write([]byte(target))
	c.pad(len(target))
}

// Bytes adds a regular file with the given content.
func (c *cpioWriter) Bytes(name string, perm uint32, data []byte) {
	name = clean(name)
	if c.seen[name] {
		return
	}
	c.Dir(path.Dir(name), 0o755)
	c.seen[name] = true
	c.header(name, modeFile|perm, len(data))
	c.write(data)
	c.pad(len(data))
}

// File adds a regular file copied from the host (symlinks followed).
func (c *cpioWriter) File(name, hostPath string) {
	name = clean(name)
	if c.seen[name] || c.err != nil {
		return
	}
	f, err := os.Open(hostPath)
	if err != nil {
		c.err = err
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		c.err = err
		return
	}
	if !st.Mode().IsRegular() {
		c.err = fmt.Errorf("%s is not a regular file", hostPath)
		return
	}
	c.Dir(path.Dir(name), 0o755)
	c.seen[name] = true
	c.header(name, modeFile|uint32(st.Mode().Perm()), int(st.Size()))
	if c.err == nil {
		n, err := io.Copy(c.w, f)
		if err == nil && n != st.Size() {
			err = fmt.Errorf("%s changed size while copying", hostPath)
		}
		c.err = err
	}
	c.pad(int(st.Size()))
}

// Close writes the trailer and returns the first error.
func (c *cpioWriter) Close() error {
	c.header("TRAILER!!!", 0, 0)
	return c.err
}

func (c *cpioWriter) header(name string, mode uint32, size int) {
	nlink := 1
	if mode&modeDir == modeDir && name != "TRAILER!!!" {
		nlink = 2
	}
	ino := c.ino
	c.ino++
	if name == "TRAILER!!!" {
		ino = 0
	}
	h := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		ino, mode, 0, 0, nlink, 0, size, 0, 0, 0, 0, len(name)+1, 0)
	c.write([]byte(h + name + "\x00"))
	c.pad(len(h) + len(name) + 1)
}

func (c *cpioWriter) write(b []byte) {
	if c.err == nil {
		_, c.err = c.w.Write(b)
	}
}

func (c *cpioWriter) pad(n int) {
	if r := n % 4; r != 0 {
		c.write(make([]byte, 4-r))
	}
}

func clean(name string) string {
	return strings.TrimPrefix(path.Clean("/"+name), "/")
}
