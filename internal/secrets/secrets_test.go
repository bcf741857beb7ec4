package secrets

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestKeyFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "k")
	if _, err := Load(path); err == nil {
		t.Fatal("a missing file loaded")
	}
	kr, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Create(path); err == nil {
		t.Fatal("Create replaced an existing file")
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 || kr.WorldReadable() {
		t.Fatalf("mode %v", st.Mode())
	}
	first := kr.Newest()
	if len(first) != KeyIDLen || len(kr.IDs()) != 1 {
		t.Fatalf("ids %v", kr.IDs())
	}
	sealed, err := kr.Seal(first, []byte("whsec_x"), []byte("row 1"))
	if err != nil || !IsSealed(sealed) || strings.Contains(sealed, "whsec_x") {
		t.Fatalf("sealed %q %v", sealed, err)
	}
	if id, ok := KeyIDOf(sealed); !ok || id != first {
		t.Fatalf("key id of %q: %q", sealed, id)
	}
	if again, _ := kr.Seal(first, []byte("whsec_x"), []byte("row 1")); again == sealed {
		t.Fatal("two seals of one value are equal: the nonce is not fresh")
	}
	if b, err := kr.Open(sealed, []byte("row 1")); err != nil || string(b) != "whsec_x" {
		t.Fatalf("open: %q %v", b, err)
	}
	if _, err := kr.Open(sealed, []byte("row 2")); err == nil {
		t.Fatal("opened under another row's data")
	}
	tampered := sealed[:len(sealed)-2] + "AA"
	if tampered == sealed {
		tampered = sealed[:len(sealed)-2] + "BB"
	}
	if _, err := kr.Open(tampered, []byte("row 1")); err == nil {
		t.Fatal("opened a changed value")
	}

	// A key added to the file is read when first needed, without a reload.
	second, err := AddKey(path)
	if err != nil || second == first {
		t.Fatal(second, err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Fatalf("mode after AddKey %v", st.Mode())
	}
	other, err := Load(path)
	if err != nil || other.Newest() != second || len(other.IDs()) != 2 {
		t.Fatalf("reloaded %v %v", other.IDs(), err)
	}
	s2, err := other.Seal(second, []byte("v"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := kr.Open(s2, nil); err != nil || string(b) != "v" {
		t.Fatalf("the first keyring did not read the new key: %v", err)
	}
	if !kr.Has(second) || kr.Newest() != second {
		t.Fatalf("after reading: %v", kr.IDs())
	}
	// Both keys open their values.
	if b, err := kr.Open(sealed, []byte("row 1")); err != nil || string(b) != "whsec_x" {
		t.Fatalf("the first key no longer opens: %v", err)
	}
	// A key that is in no file.
	stranger, err := Create(filepath.Join(dir, "other"))
	if err != nil {
		t.Fatal(err)
	}
	s3, _ := stranger.Seal(stranger.Newest(), []byte("v"), nil)
	if _, err := kr.Open(s3, nil); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("a stranger's value: %v", err)
	}
	if _, err := kr.Seal(stranger.Newest(), []byte("v"), nil); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("seal under a stranger's key: %v", err)
	}
}

// TestAddKeyKeepsOwner: a key file the service reads through its group
// (deployment.md: chgrp xaalis, chmod 640) keeps its owner, group and mode
// when root adds a key, so that the service still reads it.
func TestAddKeyKeepsOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("changing a file's owner needs root")
	}
	path := filepath.Join(t.TempDir(), "k")
	if _, err := Create(path); err != nil {
		t.Fatal(err)
	}
	const uid, gid = 65534, 65534 // nobody, nogroup
	if err := os.Chown(path, uid, gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := AddKey(path); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if u, g, ok := owner(st); !ok || u != uid || g != gid || st.Mode().Perm() != 0o640 {
		t.Fatalf("after AddKey: %d:%d %v", u, g, st.Mode())
	}
}

// TestAddKeyThroughALink: a key file reached through a symbolic link
// gets the key in its target, and the link stays a link.
func TestAddKeyThroughALink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "real", "k")
	if _, err := Create(target); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.key")
	if err := os.Symlink(filepath.Join("real", "k"), link); err != nil {
		t.Fatal(err)
	}
	id, err := AddKey(link)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link was replaced: %v %v", st.Mode(), err)
	}
	kr, err := Load(target)
	if err != nil || !kr.Has(id) || len(kr.IDs()) != 2 {
		t.Fatalf("the target lacks the new key %s: %v", id, err)
	}
	// A link to nothing is refused, not replaced by a new file.
	dangling := filepath.Join(dir, "dangling.key")
	if err := os.Symlink(filepath.Join(dir, "gone"), dangling); err != nil {
		t.Fatal(err)
	}
	if _, err := AddKey(dangling); err == nil {
		t.Fatal("a key was added through a link to nothing")
	}
	if st, err := os.Lstat(dangling); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the dangling link was replaced: %v", err)
	}
}

func TestParseKeyFile(t *testing.T) {
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(i)
	}
	for _, c := range []struct {
		name, text string
		ok         bool
	}{
		{"base64", base64.StdEncoding.EncodeToString(key), true},
		{"base64 without padding, comments, blank lines", "# c\n\n  " + base64.RawStdEncoding.EncodeToString(key) + "  \n", true},
		{"hex", hex.EncodeToString(key), true},
		{"two keys", base64.StdEncoding.EncodeToString(key) + "\n" + hex.EncodeToString(key[:16]) + hex.EncodeToString(key[:16]), true},
		{"empty", "# nothing\n", false},
		{"short", base64.StdEncoding.EncodeToString(key[:16]), false},
		{"garbage", "not a key!", false},
		{"raw", string(key), true},
	} {
		path := filepath.Join(t.TempDir(), "k")
		if err := os.WriteFile(path, []byte(c.text), 0o600); err != nil {
			t.Fatal(err)
		}
		kr, err := Load(path)
		if (err == nil) != c.ok {
			t.Fatalf("%s: %v", c.name, err)
		}
		if err == nil && kr.IDs()[0] != KeyID(key) {
			t.Fatalf("%s: id %s", c.name, kr.IDs()[0])
		}
		if err != nil && c.name == "short" && !strings.Contains(err.Error(), "line 1") {
			t.Fatalf("%s: the error names no line: %v", c.name, err)
		}
	}
	// AddKey refuses to append to a file it cannot read.
	path := filepath.Join(t.TempDir(), "bad")
	os.WriteFile(path, []byte("garbage"), 0o600)
	if _, err := AddKey(path); err == nil {
		t.Fatal("AddKey appended to a broken file")
	}
}
