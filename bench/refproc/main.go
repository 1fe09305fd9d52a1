// Command refproc is the benchmark's reference ext_proc processor: the same work as trafficsplit's Python processor
// for one sticky split (read the affinity cookie or mint one, FNV-1a + avalanche pick per docs/spec.md §1, routing header,
// clear_route_cache, Set-Cookie as dynamic metadata), compiled. Benchmark-only: it shows what the ext_proc
// architecture costs apart from Python. Not part of the product.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/structpb"
)

type backend struct {
	cluster string
	weight  uint32
}

type server struct {
	extprocv3.UnimplementedExternalProcessorServer
	host     string
	cookie   string
	backends []backend
	total    uint32
	counter  atomic.Uint64
}

// keyHash is docs/spec.md §1: 32-bit FNV-1a over the bytes, then the avalanche finaliser.
func keyHash(key string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h = (h ^ uint32(key[i])) * 16777619
	}
	h ^= h >> 15
	h *= 2246822507
	h ^= h >> 13
	return h
}

func (s *server) pick(key string) string {
	slot := keyHash(key) % s.total
	var sum uint32
	for _, b := range s.backends {
		sum += b.weight
		if slot < sum {
			return b.cluster
		}
	}
	return s.backends[len(s.backends)-1].cluster
}

// readCookie: the first `name=value` pair across the Cookie lines (RFC 6265 pairs, trimmed).
func readCookie(lines []string, name string) string {
	for _, line := range lines {
		for _, pair := range strings.Split(line, ";") {
			k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
			if ok && k == name && v != "" && len(v) <= 256 {
				return strings.TrimSpace(v)
			}
		}
	}
	return ""
}

func (s *server) mint() string {
	return fmt.Sprintf("%012x%012x", time.Now().UnixMilli()&0xffffffffffff, s.counter.Add(1)&0xffffffffffff)
}

func (s *server) reply(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
	rh := req.GetRequestHeaders()
	if rh == nil {
		return &extprocv3.ProcessingResponse{}
	}
	var authority string
	var cookies []string
	for _, h := range rh.GetHeaders().GetHeaders() {
		v := string(h.GetRawValue())
		if v == "" {
			v = h.GetValue()
		}
		switch h.GetKey() {
		case ":authority":
			authority = v
		case "cookie":
			cookies = append(cookies, v)
		}
	}
	if authority != s.host {
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{
			ImmediateResponse: &extprocv3.ImmediateResponse{Body: []byte("no TrafficSplit serves this host\n")},
		}}
	}
	key := readCookie(cookies, s.cookie)
	setCookie := ""
	if key == "" {
		key = s.mint()
		setCookie = s.cookie + "=" + key + "; Path=/; HttpOnly; SameSite=Lax"
	}
	resp := &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{
		RequestHeaders: &extprocv3.HeadersResponse{Response: &extprocv3.CommonResponse{
			HeaderMutation: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{{
				Header:       &corev3.HeaderValue{Key: "x-trafficsplit-cluster", RawValue: []byte(s.pick(key))},
				AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
			}}},
			ClearRouteCache: true,
		}},
	}}
	if setCookie != "" {
		resp.DynamicMetadata = &structpb.Struct{Fields: map[string]*structpb.Value{
			"trafficsplit": structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
				"set_cookie": structpb.NewStringValue(setCookie),
			}}),
		}}
	}
	return resp
}

func (s *server) Process(stream extprocv3.ExternalProcessor_ProcessServer) error {
	for {
		req, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := stream.Send(s.reply(req)); err != nil {
			return err
		}
	}
}

func main() {
	listen := flag.String("listen", "", "unix:/path or HOST:PORT")
	host := flag.String("host", "shop.example", "the split's host")
	cookie := flag.String("cookie", "ts", "the affinity cookie's name")
	backends := flag.String("backends", "", "CLUSTER=WEIGHT,... in the split's order")
	flag.Parse()
	s := &server{host: *host, cookie: *cookie}
	s.counter.Store(rand.Uint64() & 0xffffffff)
	for _, item := range strings.Split(*backends, ",") {
		name, w, ok := strings.Cut(item, "=")
		weight, err := strconv.ParseUint(w, 10, 32)
		if !ok || err != nil {
			log.Fatalf("bad -backends item %q", item)
		}
		s.backends = append(s.backends, backend{name, uint32(weight)})
		s.total += uint32(weight)
	}
	if s.total == 0 {
		log.Fatal("-backends: total weight must be > 0")
	}
	network, addr := "tcp", *listen
	if strings.HasPrefix(addr, "unix:") {
		network, addr = "unix", strings.TrimPrefix(addr, "unix:")
		_ = os.Remove(addr)
	}
	lis, err := net.Listen(network, addr)
	if err != nil {
		log.Fatal(err)
	}
	g := grpc.NewServer(grpc.MaxConcurrentStreams(10000))
	extprocv3.RegisterExternalProcessorServer(g, s)
	fmt.Println("listening", lis.Addr())
	log.Fatal(g.Serve(lis))
}
