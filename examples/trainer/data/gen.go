//go:build ignore

// gen writes train.csv and test.csv: a binary classification problem drawn from a hidden
// linear model plus noise, so that a logistic regression can learn it but not perfectly
// (test accuracy about 0.9). Run from this directory: go run gen.go
package main

import (
	"encoding/csv"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"strconv"
)

const (
	features = 8
	seed     = 20260301
	// noise is the standard deviation of the logit noise. With the weights below
	// (norm about 3.1), about 1 label in 10 falls on the "wrong" side of the hidden
	// boundary, which caps any linear model near 0.9 accuracy.
	noise = 1.0
)

// hidden is the true model: weights and bias. Feature 4 is pure noise on purpose.
var (
	hiddenW = [features]float64{1.5, -2.0, 0.8, 0.0, 1.2, -0.5, 0.3, -1.0}
	hiddenB = 0.25
)

func main() {
	rng := rand.New(rand.NewPCG(seed, 1))
	write("train.csv", 2000, rng)
	write("test.csv", 500, rng)
}

func write(name string, rows int, rng *rand.Rand) {
	f, err := os.Create(name)
	if err != nil {
		log.Fatal(err)
	}
	w := csv.NewWriter(f)
	header := make([]string, 0, features+1)
	for j := range features {
		header = append(header, fmt.Sprintf("x%d", j+1))
	}
	w.Write(append(header, "label"))
	pos := 0
	for range rows {
		rec := make([]string, 0, features+1)
		logit := hiddenB + noise*rng.NormFloat64()
		for j := range features {
			x := rng.NormFloat64()
			logit += hiddenW[j] * x
			rec = append(rec, strconv.FormatFloat(x, 'f', 4, 64))
		}
		label := "0"
		if logit > 0 {
			label = "1"
			pos++
		}
		w.Write(append(rec, label))
	}
	w.Flush()
	if err := w.Error(); err != nil {
		log.Fatal(err)
	}
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %d rows, %d positive\n", name, rows, pos)
}
