use std::time::Duration;

use delayq::{ReceiveOptions, SendOptions, State};

use crate::common::*;

#[tokio::test]
async fn send_receive_ack() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "orders");
    let sent = q.send(b"hello", &SendOptions::new()).await.expect("send");
    assert!(!sent.duplicate);
    let info = q.get(&sent.id).await.expect("get").expect("exists");
    assert_eq!(info.state, State::Ready);
    let mut c = q.consumer().await.expect("consumer");
    let got = c
        .receive(&ReceiveOptions { max: 10, lease: Duration::from_secs(5), wait: Duration::from_secs(1) })
        .await
        .expect("receive");
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].payload, b"hello");
    assert_eq!(got[0].id, sent.id);
    q.ack(&got[0]).await.expect("ack");
    assert!(q.get(&sent.id).await.expect("get").is_none());
}
