use super::*;
use crate::budget::Budget;
use crate::http::HttpError;
use proptest::prelude::*;

/// A source that hands out its bytes in the given chunk sizes, then
/// says WouldBlock (like a non-blocking socket between packets).
struct Trickle<'a> {
    data: &'a [u8],
}

impl Read for Trickle<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.data.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = out.len().min(self.data.len());
        out[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

/// What a request looked like to an app: method, target, headers, body.
type Seen = (String, String, Vec<(String, Vec<u8>)>, Vec<u8>);

/// Feeds `input` in pieces cut at `cuts`, collecting every request read
/// (or the first error).
fn run(input: &[u8], cuts: &[usize], params: &ConnParams) -> Result<Vec<Seen>, HttpError> {
    let mut reader = RequestReader::default();
    let mut seen = Vec::new();
    let mut bounds: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
    bounds.push(input.len());
    bounds.sort_unstable();
    let mut from = 0;
    for to in bounds {
        let mut src = Trickle {
            data: &input[from..to],
        };
        from = to;
        // A full buffer leaves bytes in the source: serve, then read on.
        loop {
            let left = src.data.len();
            let state = reader.fill(&mut src, params, false, &mut BufPool::default());
            let mut served = false;
            while reader.next_request(params)? {
                take(&mut reader, &mut seen);
                served = true;
            }
            if state != ReadState::Full || (src.data.len() == left && !served) {
                break;
            }
        }
    }
    Ok(seen)
}

/// Records the ready request and consumes it.
fn take(reader: &mut RequestReader, seen: &mut Vec<Seen>) {
    {
        let (head, buf, body) = reader.parts().expect("a ready request has parts");
        let text =
            |r: &std::ops::Range<usize>| String::from_utf8_lossy(&buf[r.clone()]).into_owned();
        seen.push((
            text(&head.method),
            text(&head.target),
            head.headers
                .iter()
                .map(|(n, v)| (text(n), buf[v.clone()].to_vec()))
                .collect(),
            body.to_vec(),
        ));
    }
    reader.consume();
}

const PIPELINE: &[u8] = b"GET /a?x=1 HTTP/1.1\r\nHost: h\r\nX-Odd: \xe9t\xe9\r\n\r\n\
POST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello\
POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nWiki\r\n5;e=1\r\npedia\r\n0\r\nT: 1\r\n\r\n\
GET /d HTTP/1.0\r\n\r\n";

#[test]
fn reads_a_pipeline_whole() {
    let seen = run(PIPELINE, &[], &ConnParams::default()).unwrap();
    let targets: Vec<&str> = seen.iter().map(|s| s.1.as_str()).collect();
    assert_eq!(targets, ["/a?x=1", "/b", "/c", "/d"]);
    assert_eq!(seen[1].3, b"hello");
    assert_eq!(seen[2].3, b"Wikipedia");
    assert_eq!(seen[0].2[1].1, b"\xe9t\xe9");
    // A pipeline longer than the read buffer is read in turns.
    let long = PIPELINE.repeat(500);
    assert!(long.len() > 4 * READ_CHUNK);
    let again = run(&long, &[], &ConnParams::default()).unwrap();
    assert_eq!(again.len(), 4 * 500);
    assert_eq!(again[4 * 499 + 2].3, b"Wikipedia");
}

#[test]
fn expect_continue_is_due_once_while_the_body_is_awaited() {
    let params = ConnParams::default();
    let mut r = RequestReader::default();
    let head = b"PUT /x HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n";
    r.fill(
        &mut Trickle { data: head },
        &params,
        false,
        &mut BufPool::default(),
    );
    assert!(!r.next_request(&params).unwrap());
    assert!(r.take_continue());
    assert!(!r.next_request(&params).unwrap());
    assert!(!r.take_continue());
    r.fill(
        &mut Trickle { data: b"ok" },
        &params,
        false,
        &mut BufPool::default(),
    );
    assert!(r.next_request(&params).unwrap());
}

#[test]
fn reads_no_further_than_the_current_request_needs() {
    let params = ConnParams::default();
    let mut pool = BufPool::default();
    // Thousands of pipelined requests: one buffer's worth is read, the
    // rest stays in the source until these are served.
    let many = b"GET /x HTTP/1.1\r\nHost: h\r\n\r\n".repeat(10_000);
    let mut src = Trickle { data: &many };
    let mut r = RequestReader::default();
    assert_eq!(r.fill(&mut src, &params, false, &mut pool), ReadState::Full);
    assert_eq!(r.buffered(), READ_CHUNK);
    assert_eq!(src.data.len(), many.len() - READ_CHUNK);
    // A body is read whole, and nothing past it.
    let body = vec![b'b'; 100_000];
    let head = format!(
        "POST /b HTTP/1.1\r\nHost: h\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let mut input = head.clone().into_bytes();
    input.extend_from_slice(&body);
    input.extend_from_slice(&many);
    let mut src = Trickle { data: &input };
    let mut r = RequestReader::default();
    assert_eq!(r.fill(&mut src, &params, false, &mut pool), ReadState::Full);
    assert!(!r.next_request(&params).unwrap());
    assert_eq!(r.fill(&mut src, &params, false, &mut pool), ReadState::Full);
    assert_eq!(r.buffered(), head.len() + body.len());
    assert!(r.next_request(&params).unwrap());
    assert_eq!(r.parts().unwrap().2, &body[..]);
    // Once it is consumed, reading goes on.
    r.consume();
    assert_eq!(r.fill(&mut src, &params, false, &mut pool), ReadState::Full);
    assert!(r.next_request(&params).unwrap());
}

/// Fills and parses until a request is ready or refused.
fn read_all(input: &[u8], budget: &Budget) -> (RequestReader, BufPool, Result<bool, HttpError>) {
    let params = ConnParams::default();
    let mut pool = BufPool::with_budget(budget.clone());
    let mut src = Trickle { data: input };
    let mut r = RequestReader::default();
    let mut got = Ok(false);
    for _ in 0..64 {
        r.fill(&mut src, &params, false, &mut pool);
        got = r.next_request_with(&params, budget, &|_, _| BodyPlan::default());
        if got != Ok(false) {
            break;
        }
    }
    (r, pool, got)
}

fn post(body_len: usize, chunked: bool) -> Vec<u8> {
    let framing = if chunked {
        "Transfer-Encoding: chunked".to_string()
    } else {
        format!("Content-Length: {body_len}")
    };
    let mut input = format!("POST /b HTTP/1.1\r\nHost: h\r\n{framing}\r\n\r\n").into_bytes();
    if chunked {
        for _ in 0..body_len / 1000 {
            input.extend_from_slice(b"3e8\r\n");
            input.extend_from_slice(&[b'c'; 1000]);
            input.extend_from_slice(b"\r\n");
        }
        input.extend_from_slice(b"0\r\n\r\n");
    } else {
        input.extend(std::iter::repeat_n(b'b', body_len));
    }
    input
}

#[test]
fn a_body_past_the_budget_is_refused_and_its_bytes_come_back() {
    use crate::budget::Refusal;
    for chunked in [false, true] {
        let budget = Budget::new(100 << 10);
        let (r, _, got) = read_all(&post(200_000, chunked), &budget);
        assert_eq!(
            got,
            Err(HttpError::OverBudget(100 << 10)),
            "chunked: {chunked}"
        );
        assert!(budget.held() <= 100 << 10);
        assert_eq!(budget.refused(Refusal::Body), 1);
        drop(r);
        assert_eq!(budget.held(), 0, "chunked: {chunked}");
    }
}

#[test]
fn a_refused_body_gives_its_bytes_back_when_abandoned() {
    // Over max_body once decoded: refused with 413 while the connection
    // stays (it lingers), so its bytes must go back then.
    let params = ConnParams {
        max_body: 100_000,
        ..ConnParams::default()
    };
    let budget = Budget::unlimited();
    let mut pool = BufPool::with_budget(budget.clone());
    let input = post(200_000, true);
    let mut src = Trickle { data: &input };
    let mut r = RequestReader::default();
    let mut got = Ok(false);
    for _ in 0..1000 {
        r.fill(&mut src, &params, false, &mut pool);
        got = r.next_request_with(&params, &budget, &|_, _| BodyPlan::default());
        if got != Ok(false) {
            break;
        }
    }
    assert_eq!(got, Err(HttpError::BodyTooLarge));
    assert!(budget.held() > 0);
    r.abandon();
    r.release(&mut pool);
    assert_eq!(budget.held(), 0);
}

#[test]
fn a_held_body_counts_past_the_first_buffer_until_consumed() {
    for chunked in [false, true] {
        let budget = Budget::unlimited();
        let (mut r, mut pool, got) = read_all(&post(200_000, chunked), &budget);
        assert_eq!(got, Ok(true));
        assert_eq!(r.parts().map(|p| p.2.len()), Some(200_000));
        assert!(budget.held() >= 200_000 - READ_CHUNK, "chunked: {chunked}");
        assert_eq!(budget.held(), r.held());
        r.consume();
        r.release(&mut pool);
        assert_eq!(budget.held(), 0, "chunked: {chunked}");
    }
    // A small request never draws on the budget.
    let budget = Budget::new(0);
    let (_r, _, got) = read_all(&post(1000, false), &budget);
    assert_eq!(got, Ok(true));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Any split of valid requests reads the same requests.
    #[test]
    fn any_split_reads_the_same(cuts in proptest::collection::vec(any::<usize>(), 0..12)) {
        let whole = run(PIPELINE, &[], &ConnParams::default()).unwrap();
        prop_assert_eq!(run(PIPELINE, &cuts, &ConnParams::default()).unwrap(), whole);
    }

    /// No input, in any split, panics the reader; it either reads
    /// requests, waits for more, or reports an error.
    #[test]
    fn arbitrary_bytes_never_panic(
        input in proptest::collection::vec(any::<u8>(), 0..600),
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
    ) {
        let params = ConnParams { max_body: 64, max_head: 256, ..ConnParams::default() };
        let _ = run(&input, &cuts, &params);
    }

    /// Mutations of a valid pipeline never panic either.
    #[test]
    fn mutated_requests_never_panic(
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6),
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
    ) {
        let mut input = PIPELINE.to_vec();
        for (at, byte) in flips {
            let i = at % input.len();
            input[i] = byte;
        }
        let _ = run(&input, &cuts, &ConnParams::default());
    }
}
