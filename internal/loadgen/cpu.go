package loadgen

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Process is a process whose CPU time a run accounts for: the server, or a database on the
// same host. PID 0 is this process (an in-process server, together with the load generator).
type Process struct {
	Name string `json:"name"`
	PID  int    `json:"pid"`
}

// CPUUse is the CPU one process spent during a run's recorded window.
type CPUUse struct {
	Name string `json:"name"`
	PID  int    `json:"pid"`
	// Seconds is user + system CPU time from the start of the recorded window to its last answer.
	Seconds float64 `json:"cpu_s"`
	// PerRequestMS is Seconds over the requests answered in the window, in milliseconds.
	PerRequestMS float64 `json:"cpu_per_request_ms"`
	// Error says why the process could not be read (it exited, or is not on this host).
	Error string `json:"error,omitempty"`
}

// clockTicks is the unit of /proc/<pid>/stat's times: USER_HZ, 100 on Linux whatever the
// kernel's own tick rate.
const clockTicks = 100

// ProcessCPU is the user + system CPU time pid has used so far (0: this process, every
// thread, read with getrusage).
func ProcessCPU(pid int) (time.Duration, error) {
	if pid == 0 {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			return 0, fmt.Errorf("getrusage: %w", err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("cpu of process %d: %w", pid, err)
	}
	return parseStatCPU(string(b))
}

// parseStatCPU reads utime and stime (fields 14 and 15) of a /proc/<pid>/stat line; the
// command name (field 2) may hold spaces and parentheses, so fields are counted from its end.
func parseStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("unreadable /proc stat line %q", stat)
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc stat line %q", stat)
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc stat time %q: %w", s, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// cpuMeter takes the processes' CPU readings at the start of the recorded window and
// turns the difference at its end into CPU per request.
type cpuMeter struct {
	procs []Process
	start []time.Duration
	errs  []error
}

func (m *cpuMeter) begin() {
	m.start, m.errs = make([]time.Duration, len(m.procs)), make([]error, len(m.procs))
	for i, p := range m.procs {
		m.start[i], m.errs[i] = ProcessCPU(p.PID)
	}
}

func (m *cpuMeter) end(answered int64) []CPUUse {
	if m.start == nil { // the window never began (cancelled in the warm-up)
		return nil
	}
	var out []CPUUse
	for i, p := range m.procs {
		u := CPUUse{Name: p.Name, PID: p.PID}
		now, err := ProcessCPU(p.PID)
		if err = firstErr(m.errs[i], err); err != nil {
			u.Error = err.Error()
		} else {
			u.Seconds = (now - m.start[i]).Seconds()
			if answered > 0 {
				u.PerRequestMS = 1000 * u.Seconds / float64(answered)
			}
		}
		out = append(out, u)
	}
	return out
}

func firstErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
