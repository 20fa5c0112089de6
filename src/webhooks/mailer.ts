import { randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import nodemailer, { type Transporter } from 'nodemailer';
import type { Config } from '../config/schema.js';

export interface Mail {
  to: string[];
  subject: string;
  text: string;
}

/** E-mail through SMTP_URL, or, without one, each message as an .eml file in DATA_DIR/outbox/ (CONTRACT §2). */
export class Mailer {
  private readonly from: string;
  private readonly transport: Transporter | null;
  private readonly outbox: string;

  constructor(config: Pick<Config, 'smtp_url' | 'data_dir' | 'public_base_url'>) {
    const host = new URL(config.public_base_url).hostname;
    // The deployment's own name when it has one; an address literal is not a mail domain.
    this.from = `Darshak <no-reply@${/[a-z]/i.test(host) && !host.includes(':') ? host : 'localhost'}>`;
    this.transport = config.smtp_url ? nodemailer.createTransport(config.smtp_url) : null;
    this.outbox = join(config.data_dir, 'outbox');
  }

  async send(mail: Mail): Promise<void> {
    const message = { from: this.from, to: mail.to.join(', '), subject: mail.subject, text: mail.text };
    if (this.transport) {
      await this.transport.sendMail(message);
      return;
    }
    const built = await nodemailer
      .createTransport({ streamTransport: true, buffer: true, newline: 'unix' })
      .sendMail(message);
    await mkdir(this.outbox, { recursive: true });
    await writeFile(join(this.outbox, `${Date.now()}-${randomBytes(4).toString('hex')}.eml`), built.message as Buffer);
  }

  close(): void {
    this.transport?.close();
  }
}
