package bench

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CPUMeter measures the CPU used between Start and Stop, by this process
// (getrusage) and by the whole machine (/proc/stat, Linux only), in cores.
type CPUMeter struct {
	wall     time.Time
	self     time.Duration
	busy, ok bool
	ticks    uint64
}

// Start begins a measurement.
func (m *CPUMeter) Start() {
	m.wall, m.self = time.Now(), selfCPU()
	m.ticks, m.ok = machineBusyTicks()
}

// Stop returns the cores used by this process and by the machine since
// Start (machine 0 when /proc/stat cannot be read).
func (m *CPUMeter) Stop() (process, machine float64) {
	wall := time.Since(m.wall).Seconds()
	if wall <= 0 {
		return 0, 0
	}
	process = (selfCPU() - m.self).Seconds() / wall
	if t, ok := machineBusyTicks(); ok && m.ok && t >= m.ticks {
		// /proc/stat counts in USER_HZ, 100 a second on Linux.
		machine = float64(t-m.ticks) / 100 / wall
	}
	return process, machine
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// machineBusyTicks is the machine's non-idle CPU time from /proc/stat.
func machineBusyTicks() (uint64, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, false
	}
	var busy uint64
	for i, v := range f[1:] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, false
		}
		// user nice system idle iowait irq softirq steal ...: idle and
		// iowait are not busy.
		if i != 3 && i != 4 && i < 8 {
			busy += n
		}
	}
	return busy, true
}
