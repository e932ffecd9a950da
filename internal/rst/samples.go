package rst

// DefaultMaxSamples is how many attributed event samples the pipeline keeps.
const DefaultMaxSamples = 1000

// sampleRing keeps the newest max records.
type sampleRing struct {
	max     int
	recs    []Record // up to 2*max; the newest max are kept
	evicted uint64   // records pushed out by newer ones
}

func (r *sampleRing) add(recs ...Record) {
	r.recs = append(r.recs, recs...)
	if len(r.recs) >= 2*r.max {
		n := len(r.recs) - r.max
		r.recs = append(r.recs[:0:0], r.recs[n:]...)
		r.evicted += uint64(n)
	}
}

// list is the newest max records, oldest first, and how many older ones
// were dropped.
func (r *sampleRing) list() ([]Record, uint64) {
	recs, evicted := r.recs, r.evicted
	if n := len(recs) - r.max; n > 0 {
		recs, evicted = recs[n:], evicted+uint64(n)
	}
	return append([]Record{}, recs...), evicted
}
