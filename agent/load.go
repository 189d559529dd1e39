package agent

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// cpuSample is the work and total jiffies of /proc/stat's cpu line.
type cpuSample struct{ work, total uint64 }

func readCPU() (cpuSample, bool) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return cpuSample{}, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return cpuSample{}, false
	}
	fields := strings.Fields(sc.Text())
	if len(fields) < 5 || fields[0] != "cpu" {
		return cpuSample{}, false
	}
	var s cpuSample
	for i, v := range fields[1:] {
		n, _ := strconv.ParseUint(v, 10, 64)
		s.total += n
		if i != 3 && i != 4 { // idle and iowait are not work
			s.work += n
		}
	}
	return s, true
}

// cpuPercent is the share of work between two samples, as Ankaios
// computes it.
func cpuPercent(prev, cur cpuSample) uint32 {
	if cur.total <= prev.total {
		return 0
	}
	return uint32((cur.work - prev.work) * 100 / (cur.total - prev.total))
}

// freeMemory reads MemAvailable from /proc/meminfo, in bytes.
func freeMemory() uint64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemAvailable:" {
			kb, _ := strconv.ParseUint(fields[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
}
