// Go net/http peer for the article comparison: GET /article answers the
// 49-byte JSON article, like Stoa's article sample app.
//
//	GOMAXPROCS=1 go run benches/peers/go_article.go 127.0.0.1:PORT
package main

import (
	"encoding/json"
	"log"
	"net/http"
	"os"
)

type article struct {
	Name string
	Body string
}

func main() {
	addr := "127.0.0.1:8081"
	if len(os.Args) > 1 {
		addr = os.Args[1]
	}
	http.HandleFunc("/article", func(w http.ResponseWriter, r *http.Request) {
		body, err := json.Marshal(article{"A Royal Baby", "A slow news week"})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	})
	log.Fatal(http.ListenAndServe(addr, nil))
}
