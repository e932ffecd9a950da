package scenarios

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Sync is one kube-proxy rule sync as its log reports it ("SyncProxyRules
// complete" with -v=2; the header time is when the line was logged).
type Sync struct {
	Start    time.Time // Complete - elapsed
	Complete time.Time
	Line     int
}

const syncCompleteMsg = `"SyncProxyRules complete"`

// ParseSyncs reads a kube-proxy log (klog text format) and returns its
// completed syncs in log order. klog headers carry no year: year and loc
// complete them. Lines that are not klog lines are skipped; a completion
// line whose header or elapsed value cannot be read is an error naming it.
func ParseSyncs(r io.Reader, year int, loc *time.Location) ([]Sync, error) {
	var out []Sync
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if !strings.Contains(line, syncCompleteMsg) {
			continue
		}
		at, err := klogTime(line, year, loc)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		el, err := klogDuration(line, "elapsed")
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		out = append(out, Sync{Start: at.Add(-el), Complete: at, Line: n})
	}
	return out, sc.Err()
}

// klogTime reads the "Lmmdd hh:mm:ss.uuuuuu" header.
func klogTime(line string, year int, loc *time.Location) (time.Time, error) {
	f := strings.Fields(line)
	if len(f) < 2 || len(f[0]) != 5 || !strings.ContainsRune("IWEF", rune(f[0][0])) {
		return time.Time{}, fmt.Errorf("not a klog header: %q", line)
	}
	t, err := time.ParseInLocation("0102 15:04:05.000000", f[0][1:]+" "+f[1], loc)
	if err != nil {
		return time.Time{}, fmt.Errorf("klog time: %w", err)
	}
	return t.AddDate(year-t.Year(), 0, 0), nil
}

// klogDuration reads key="1.5ms" (or key=1.5ms) from a structured line.
func klogDuration(line, key string) (time.Duration, error) {
	i := strings.Index(line, " "+key+"=")
	if i < 0 {
		return 0, fmt.Errorf("no %s= in %q", key, line)
	}
	v := line[i+len(key)+2:]
	if j := strings.IndexByte(v, ' '); j >= 0 {
		v = v[:j]
	}
	if u, err := strconv.Unquote(v); err == nil {
		v = u
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", key, err)
	}
	return d, nil
}

// MatchSync finds the sync that programmed a change the agent saw
// programmed at t2: among syncs that started no later than t2 + slack, the
// one whose completion is nearest to t2. ok is false when none qualifies.
func MatchSync(syncs []Sync, t2 time.Time, slack time.Duration) (Sync, bool) {
	var best Sync
	bestD := time.Duration(math.MaxInt64)
	for _, s := range syncs {
		if s.Start.After(t2.Add(slack)) {
			continue
		}
		d := s.Complete.Sub(t2)
		if d < 0 {
			d = -d
		}
		if d < bestD {
			best, bestD = s, d
		}
	}
	return best, bestD != time.Duration(math.MaxInt64)
}

// Quantile returns the q-quantile (nearest rank) of ds; 0 for none.
func Quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := int(math.Ceil(q*float64(len(s)))) - 1
	rank = max(0, min(rank, len(s)-1))
	return s[rank]
}
