package client

import (
	"context"
	"iter"
	"net/http"
	"net/url"
	"strconv"
)

// ListParams pages a list: PerPage items a page (the server's default, 20,
// when 0; at most 100), starting at page Page (1 when 0).
type ListParams struct {
	Page    int
	PerPage int
}

func (p ListParams) values() url.Values {
	q := url.Values{}
	if p.PerPage > 0 {
		q.Set("per_page", strconv.Itoa(p.PerPage))
	}
	return q
}

// pages iterates over every item of a paginated list, fetching page after
// page until the last. An error ends the iteration after it is yielded.
func pages[T any](ctx context.Context, c *Client, path string, q url.Values, lp ListParams, opts []RequestOption) iter.Seq2[*T, error] {
	return func(yield func(*T, error) bool) {
		page := max(lp.Page, 1)
		for {
			pq := url.Values{}
			for k, v := range q {
				pq[k] = v
			}
			pq.Set("page", strconv.Itoa(page))
			var env listEnvelope[*T]
			if err := c.call(ctx, &request{method: http.MethodGet, path: path, query: pq}, &env, opts); err != nil {
				yield(nil, err)
				return
			}
			for _, item := range env.Data {
				if !yield(item, nil) {
					return
				}
			}
			if page >= env.Pagination.LastPage || len(env.Data) == 0 {
				return
			}
			page++
		}
	}
}
