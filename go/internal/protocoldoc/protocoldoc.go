// Package protocoldoc reads the metrics section of docs/protocol.md, the
// contract every binding follows. Tests compare what the Go code exports
// with it: a second source, written for people, so a metric that drifts
// from core fails instead of being compared with itself.
package protocoldoc

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// Metric is one metric as the table and the text of the section describe it.
type Metric struct {
	Name, Kind, Help string
	// Labels are every label the table names (the optional tenant included).
	Labels []string
}

// Metrics reads the metrics section of the protocol document at path: the
// table (name, type, labels), the help texts in table order and the
// histogram's buckets in seconds.
func Metrics(path string) ([]Metric, []float64, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	section := string(text)
	start := strings.Index(section, "\n## Metrics\n")
	if start < 0 {
		return nil, nil, errors.New(`no "## Metrics" section`)
	}
	section = section[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	var metrics []Metric
	row := regexp.MustCompile("(?m)^\\| `(ratelimit_[a-z_]+)` \\| ([a-z]+) \\| ([^|]+) \\|")
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		var labels []string
		for _, l := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(m[3], -1) {
			labels = append(labels, l[1])
		}
		metrics = append(metrics, Metric{Name: m[1], Kind: m[2], Labels: labels})
	}
	flat := strings.Join(strings.Fields(section), " ")
	helps := regexp.MustCompile(`help texts \(([^)]*)\)`).FindStringSubmatch(flat)
	if helps == nil || len(metrics) < 3 {
		return nil, nil, fmt.Errorf("the metrics section changed shape: %d table rows, help texts found: %v",
			len(metrics), helps != nil)
	}
	// The help texts of the first rows, in table order (a later row's may
	// be left to core; its Help is then "").
	quoted := regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(helps[1], -1)
	if len(quoted) < 3 || len(quoted) > len(metrics) {
		return nil, nil, fmt.Errorf("%d help texts for %d metrics", len(quoted), len(metrics))
	}
	for i := range quoted {
		metrics[i].Help = quoted[i][1]
	}
	bucketText := regexp.MustCompile(`buckets \(([^)]*)\)`).FindStringSubmatch(flat)
	if bucketText == nil {
		return nil, nil, errors.New("the metrics section names no buckets")
	}
	var buckets []float64
	for _, b := range strings.Split(bucketText[1], ",") {
		value, unit, _ := strings.Cut(strings.TrimSpace(b), " ")
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return nil, nil, fmt.Errorf("bucket %q: %v", b, err)
		}
		switch unit {
		case "ms":
			v /= 1000
		case "s":
		default:
			return nil, nil, fmt.Errorf("bucket %q: unit %q", b, unit)
		}
		buckets = append(buckets, v)
	}
	return metrics, buckets, nil
}
