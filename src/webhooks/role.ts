import type { ModuleDef } from '../modules.js';
import { Mailer } from './mailer.js';
import { WebhookService } from './service.js';

/** The `webhooks` role: delivery of webhook events (any number of processes share its consumers). */
export const webhooksRole: ModuleDef = {
  deps: ['bus', 'control'],
  role: true,
  async start(services) {
    const { config } = services;
    const mailer = new Mailer(config);
    const service = await WebhookService.start(services.get('bus'), services.get('control'), mailer, services.log, {
      allowHosts: config.webhook_allow_hosts,
      dashboardUrl: config.public_base_url,
    });
    return {
      async stop() {
        await service.stop();
        mailer.close();
      },
    };
  },
};
