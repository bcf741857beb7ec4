package sqlite

import (
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// The WAL's frames in one write.
//
// A COMMIT appends the pages its transaction changed to the WAL, each as a
// frame: SQLite writes a frame's 24-byte header and its page in two
// pwrite calls, so a batch of five payments (about 20 frames) made 40
// system calls, a quarter of the writer's CPU under load. walVFS is the
// default VFS (unix) with one difference, on the WAL file alone: the
// writes that append to it, each continuing the one before, are gathered
// in memory and go to the file in one write when the transaction's commit
// frame (the frame whose header gives the database's size) has been
// gathered, before the writer's connection does anything else with the
// file, before a write elsewhere in it, or when the buffer is full. A
// write elsewhere (SQLite rewriting a frame in place) is not gathered.
//
// Nothing reads what is gathered before it is written. Other connections
// read a frame only once the wal-index publishes it, which SQLite does
// after the commit frame's write has returned, and so after the gathered
// frames are in the file; the writer's own connection reads the WAL
// through xRead, which writes the gathered frames first. A write that
// fails fails the commit frame's write, and SQLite's COMMIT with it, as a
// failed pwrite would. Durability is unchanged: the syncer fdatasyncs the
// WAL once the COMMIT has returned, the frames then in the file.

// walVFS is the name the writer connection opens its database with
// (dsn's vfs parameter).
const walVFS = "xaalis-wal"

const (
	// walFrameHeader is the size of a frame's header: a write of that
	// size where a frame starts is one (a page split in two writes may
	// have a part of that size elsewhere).
	walFrameHeader = 24
	// walBufferSize bounds what one WAL file gathers: the frames of a
	// batch of about 30 pages; a bigger transaction writes in steps.
	// SQLite's unix VFS masks a write's length with 0x1ffff: a write of
	// 128 KiB or more would lose its high bits and fail.
	walBufferSize = 124 << 10
)

var (
	walOnce sync.Once
	walErr  error
	// walBase is the VFS walVFS wraps, walIO the WAL file's methods,
	// walBaseIO the methods they wrap. Allocated once by SQLite's
	// allocator (SQLite keeps pointers to them) and never freed.
	walBase, walIO, walBaseIO uintptr

	walFilesMu sync.Mutex
	// walFiles is the state of every WAL file opened through walVFS, by
	// the address of its sqlite3_file.
	walFiles = map[uintptr]*walFile{}

	// walWrites counts the WAL writes SQLite asked for, walFlushes the
	// writes made to the file: their ratio is what the gathering saves.
	// walRewrites counts the writes SQLite made in place, past the WAL's
	// header.
	walWrites, walFlushes, walRewrites atomic.Int64
)

// walFile is the gathered writes of one WAL file. SQLite calls a file's
// methods from one connection at a time, under that connection's mutex.
type walFile struct {
	buf uintptr // walBufferSize bytes from SQLite's allocator
	n   int64   // bytes gathered
	off int64   // the file offset of buf's first byte
	// next is the file offset after the last write (-1 before the first).
	next int64
	// commit is set by the header of a commit frame and cleared by the
	// header of any other: while it is set, a write goes to the file
	// before it returns.
	commit bool
	// page is the WAL's page size, from its header (0: not read yet, -1:
	// unknown, and then nothing is gathered). A frame's header is a
	// 24-byte write where a frame starts: SQLite may also write a page
	// in two parts, one of which may be 24 bytes long.
	page int64
}

// walHeader is the size of the WAL's own header, at its start.
const walHeader = 32

// pageSize returns the page size the WAL's header gives (-1 if it
// cannot be read).
func (w *walFile) pageSize(tls *libc.TLS, pFile uintptr) int64 {
	if w.page != 0 {
		return w.page
	}
	w.page = -1
	hdr := sqlite3.Xsqlite3_malloc64(tls, walHeader)
	if hdr == 0 {
		return w.page
	}
	defer sqlite3.Xsqlite3_free(tls, hdr)
	if rc := baseRead(tls, pFile, hdr, walHeader, 0); rc == sqlite3.SQLITE_OK {
		w.page = walPageSize(unsafe.Slice((*byte)(ptr(hdr)), walHeader))
	}
	return w.page
}

// walPageSize reads the page size from a WAL header (bytes 8-11; 1 means
// 65536), -1 when it is not one SQLite makes.
func walPageSize(hdr []byte) int64 {
	p := int64(binary.BigEndian.Uint32(hdr[8:12]))
	if p == 1 {
		p = 65536
	}
	if p < 512 || p > 65536 || p&(p-1) != 0 {
		return -1
	}
	return p
}

// registerWALVFS registers walVFS once.
func registerWALVFS() error {
	walOnce.Do(func() { walErr = registerWALVFSOnce() })
	return walErr
}

func registerWALVFSOnce() error {
	tls := libc.NewTLS()
	defer tls.Close()
	walBase = sqlite3.Xsqlite3_vfs_find(tls, 0)
	if walBase == 0 {
		return fmt.Errorf("sqlite: no default VFS")
	}
	v := sqlite3.Xsqlite3_malloc64(tls, uint64(unsafe.Sizeof(sqlite3.Tsqlite3_vfs{}))+uint64(len(walVFS))+1)
	if v == 0 {
		return fmt.Errorf("sqlite: register %s: out of memory", walVFS)
	}
	vfs := (*sqlite3.Tsqlite3_vfs)(ptr(v))
	*vfs = *(*sqlite3.Tsqlite3_vfs)(ptr(walBase))
	name := v + unsafe.Sizeof(sqlite3.Tsqlite3_vfs{})
	copy(unsafe.Slice((*byte)(ptr(name)), len(walVFS)+1), walVFS+"\x00")
	vfs.FzName, vfs.FpNext = name, 0
	*(*func(*libc.TLS, uintptr, uintptr, uintptr, int32, uintptr) int32)(unsafe.Pointer(&vfs.FxOpen)) = walOpen
	if rc := sqlite3.Xsqlite3_vfs_register(tls, v, 0); rc != sqlite3.SQLITE_OK {
		return fmt.Errorf("sqlite: register %s: code %d", walVFS, rc)
	}
	return nil
}

// ptr turns an address from SQLite's allocator into a pointer. (The
// address is of memory outside Go's heap, which the garbage collector
// neither moves nor frees.)
func ptr(u uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&u)) }

// walOpen opens a file as the default VFS does, and gives a WAL file the
// methods that gather its writes.
func walOpen(tls *libc.TLS, _ uintptr, zName uintptr, pFile uintptr, flags int32, pOutFlags uintptr) int32 {
	base := (*sqlite3.Tsqlite3_vfs)(ptr(walBase))
	rc := (*(*func(*libc.TLS, uintptr, uintptr, uintptr, int32, uintptr) int32)(unsafe.Pointer(&base.FxOpen)))(tls, walBase, zName, pFile, flags, pOutFlags)
	if rc != sqlite3.SQLITE_OK || flags&sqlite3.SQLITE_OPEN_WAL == 0 {
		return rc
	}
	f := (*sqlite3.Tsqlite3_file)(ptr(pFile))
	walFilesMu.Lock()
	defer walFilesMu.Unlock()
	if walIO == 0 {
		if walIO = sqlite3.Xsqlite3_malloc64(tls, uint64(unsafe.Sizeof(sqlite3.Tsqlite3_io_methods{}))); walIO == 0 {
			return rc // the file works unwrapped
		}
		walBaseIO = f.FpMethods
		io := (*sqlite3.Tsqlite3_io_methods)(ptr(walIO))
		*io = *(*sqlite3.Tsqlite3_io_methods)(ptr(walBaseIO))
		*(*func(*libc.TLS, uintptr) int32)(unsafe.Pointer(&io.FxClose)) = walClose
		*(*func(*libc.TLS, uintptr, uintptr, int32, int64) int32)(unsafe.Pointer(&io.FxRead)) = walRead
		*(*func(*libc.TLS, uintptr, uintptr, int32, int64) int32)(unsafe.Pointer(&io.FxWrite)) = walWrite
		*(*func(*libc.TLS, uintptr, int64) int32)(unsafe.Pointer(&io.FxTruncate)) = walTruncate
		*(*func(*libc.TLS, uintptr, int32) int32)(unsafe.Pointer(&io.FxSync)) = walSync
		*(*func(*libc.TLS, uintptr, uintptr) int32)(unsafe.Pointer(&io.FxFileSize)) = walFileSize
		*(*func(*libc.TLS, uintptr, int32) int32)(unsafe.Pointer(&io.FxLock)) = walLock
		*(*func(*libc.TLS, uintptr, int32) int32)(unsafe.Pointer(&io.FxUnlock)) = walUnlock
		*(*func(*libc.TLS, uintptr, int32, uintptr) int32)(unsafe.Pointer(&io.FxFileControl)) = walFileControl
	}
	if f.FpMethods != walBaseIO {
		return rc // another kind of file than the one walIO wraps
	}
	buf := sqlite3.Xsqlite3_malloc64(tls, walBufferSize)
	if buf == 0 {
		return rc
	}
	walFiles[pFile] = &walFile{buf: buf, next: -1}
	f.FpMethods = walIO
	return rc
}

// wal returns the state of a WAL file opened through walVFS.
func wal(pFile uintptr) *walFile {
	walFilesMu.Lock()
	w := walFiles[pFile]
	walFilesMu.Unlock()
	return w
}

// baseIO is the methods of the default VFS that walIO wraps.
func baseIO() *sqlite3.Tsqlite3_io_methods { return (*sqlite3.Tsqlite3_io_methods)(ptr(walBaseIO)) }

// baseWrite and baseRead are the default VFS's xWrite and xRead.
func baseWrite(tls *libc.TLS, pFile, buf uintptr, n int32, off int64) int32 {
	return (*(*func(*libc.TLS, uintptr, uintptr, int32, int64) int32)(unsafe.Pointer(&baseIO().FxWrite)))(tls, pFile, buf, n, off)
}

func baseRead(tls *libc.TLS, pFile, buf uintptr, n int32, off int64) int32 {
	return (*(*func(*libc.TLS, uintptr, uintptr, int32, int64) int32)(unsafe.Pointer(&baseIO().FxRead)))(tls, pFile, buf, n, off)
}

// flush writes what w gathered to the file.
func (w *walFile) flush(tls *libc.TLS, pFile uintptr) int32 {
	if w.n == 0 {
		return sqlite3.SQLITE_OK
	}
	walFlushes.Add(1)
	rc := baseWrite(tls, pFile, w.buf, int32(w.n), w.off)
	if rc == sqlite3.SQLITE_OK {
		// Kept on a failure: the next call writes them again, and fails
		// again while the disk does, where SQLite ignores an error (a
		// close) as where it does not.
		w.n = 0
	}
	return rc
}

func walWrite(tls *libc.TLS, pFile uintptr, zBuf uintptr, iAmt int32, iOfst int64) int32 {
	walWrites.Add(1)
	w := wal(pFile)
	src := unsafe.Slice((*byte)(ptr(zBuf)), iAmt)
	// Only a write that continues the one before is gathered: the frames
	// a transaction appends. A write elsewhere goes to the file at once,
	// after what was gathered: the WAL's header when the log starts over,
	// and what SQLite rewrites in place (a page a transaction changes
	// again, the headers whose checksums it then computes again, the last
	// of which, a commit frame's, no page follows).
	appends := iOfst == w.next
	w.next = iOfst + int64(iAmt)
	if iOfst == 0 && iAmt == walHeader {
		w.page = walPageSize(src) // the log starts over
	}
	page := w.pageSize(tls, pFile)
	if page < 0 {
		appends = false // nothing gathered
	}
	header := iAmt == walFrameHeader && page > 0 && iOfst >= walHeader && (iOfst-walHeader)%(page+walFrameHeader) == 0
	if header {
		// Bytes 4-7 of a frame's header: the database's size in pages
		// after a commit, 0 in any other frame. From a commit frame's
		// header on, written here or at once, every write goes to the file
		// before it returns: the commit frame's page (which SQLite may
		// write apart from its header, the first frame of a transaction
		// after a rollback, or after the WAL was opened), and the frames
		// that pad it to a sector. The next transaction's first frame, not
		// a commit's, starts gathering again.
		w.commit = binary.BigEndian.Uint32(src[4:8]) != 0
	}
	if !appends && iOfst > 0 {
		walRewrites.Add(1)
	}
	if !appends || w.n+int64(iAmt) > walBufferSize {
		if rc := w.flush(tls, pFile); rc != sqlite3.SQLITE_OK {
			return rc
		}
	}
	if !appends || int64(iAmt) > walBufferSize {
		walFlushes.Add(1)
		return baseWrite(tls, pFile, zBuf, iAmt, iOfst)
	}
	if w.n == 0 {
		w.off = iOfst
	}
	copy(unsafe.Slice((*byte)(ptr(w.buf+uintptr(w.n))), iAmt), src)
	w.n += int64(iAmt)
	if w.commit && !header {
		return w.flush(tls, pFile)
	}
	return sqlite3.SQLITE_OK
}

func walRead(tls *libc.TLS, pFile uintptr, zBuf uintptr, iAmt int32, iOfst int64) int32 {
	if rc := wal(pFile).flush(tls, pFile); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return baseRead(tls, pFile, zBuf, iAmt, iOfst)
}

func walTruncate(tls *libc.TLS, pFile uintptr, size int64) int32 {
	if rc := wal(pFile).flush(tls, pFile); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return (*(*func(*libc.TLS, uintptr, int64) int32)(unsafe.Pointer(&baseIO().FxTruncate)))(tls, pFile, size)
}

func walSync(tls *libc.TLS, pFile uintptr, flags int32) int32 {
	if rc := wal(pFile).flush(tls, pFile); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return (*(*func(*libc.TLS, uintptr, int32) int32)(unsafe.Pointer(&baseIO().FxSync)))(tls, pFile, flags)
}

func walFileSize(tls *libc.TLS, pFile uintptr, pSize uintptr) int32 {
	if rc := wal(pFile).flush(tls, pFile); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return (*(*func(*libc.TLS, uintptr, uintptr) int32)(unsafe.Pointer(&baseIO().FxFileSize)))(tls, pFile, pSize)
}

func walLock(tls *libc.TLS, pFile uintptr, lock int32) int32 {
	if rc := wal(pFile).flush(tls, pFile); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return (*(*func(*libc.TLS, uintptr, int32) int32)(unsafe.Pointer(&baseIO().FxLock)))(tls, pFile, lock)
}

func walUnlock(tls *libc.TLS, pFile uintptr, lock int32) int32 {
	if rc := wal(pFile).flush(tls, pFile); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return (*(*func(*libc.TLS, uintptr, int32) int32)(unsafe.Pointer(&baseIO().FxUnlock)))(tls, pFile, lock)
}

func walFileControl(tls *libc.TLS, pFile uintptr, op int32, pArg uintptr) int32 {
	if rc := wal(pFile).flush(tls, pFile); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return (*(*func(*libc.TLS, uintptr, int32, uintptr) int32)(unsafe.Pointer(&baseIO().FxFileControl)))(tls, pFile, op, pArg)
}

// walClose writes what the file gathered, closes it, and forgets it.
// (SQLite ignores xClose's answer; what is left gathered at a close is
// never a commit's: every commit is written before its COMMIT returns.)
func walClose(tls *libc.TLS, pFile uintptr) int32 {
	walFilesMu.Lock()
	w := walFiles[pFile]
	delete(walFiles, pFile)
	walFilesMu.Unlock()
	rc := w.flush(tls, pFile)
	if crc := (*(*func(*libc.TLS, uintptr) int32)(unsafe.Pointer(&baseIO().FxClose)))(tls, pFile); rc == sqlite3.SQLITE_OK {
		rc = crc
	}
	sqlite3.Xsqlite3_free(tls, w.buf)
	return rc
}
