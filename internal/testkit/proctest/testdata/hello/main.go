// Command hello is built by proctest's test of Build.
package main

import "fmt"

func main() { fmt.Println("hello") }
