package upstream

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// Point is one bucket of a stats series.
type Point struct {
	T     time.Time `json:"t"`
	Count int64     `json:"count"`
}

// Series is one key's counts.
type Series struct {
	Key    string  `json:"key"`
	Total  int64   `json:"total"`
	Points []Point `json:"points"`
}

// Stats is the renderer's answer to GET /v1/stats/{dimension}.
type Stats struct {
	Dimension   string    `json:"dimension"`
	Granularity string    `json:"granularity"`
	From        time.Time `json:"from"`
	To          time.Time `json:"to"`
	Total       int64     `json:"total"`
	Series      []Series  `json:"series"`
}

// Renderer is the visual renderer's client.
type Renderer struct{ *Client }

// Stats returns counts of one dimension (country, device_model, os, threat).
func (c Renderer) Stats(ctx context.Context, bearer, dimension string, q url.Values) (Stats, error) {
	var out Stats
	err := c.call(ctx, http.MethodGet, "/v1/stats/"+url.PathEscape(dimension), q, bearer, nil, &out)
	return out, err
}

// Chart opens GET /v1/charts/{dimension}.svg; the caller closes the body.
func (c Renderer) Chart(ctx context.Context, bearer, dimension string, q url.Values) (*http.Response, error) {
	return c.do(ctx, http.MethodGet, "/v1/charts/"+url.PathEscape(dimension)+".svg", q, bearer, nil)
}
