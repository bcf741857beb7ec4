package sqlite

import "golang.org/x/sys/unix"

// fsSize is the size in bytes of the filesystem holding dir.
func fsSize(dir string) (int64, bool) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil || st.Blocks == 0 {
		return 0, false
	}
	return int64(st.Blocks) * int64(st.Bsize), true
}
